"""OmegaConf resolvers the configs use; registered once when `src` is imported."""

from __future__ import annotations

import math
import secrets
from pathlib import Path

from omegaconf import OmegaConf

PROJECT_ROOT = Path(__file__).resolve().parents[2]


def register_resolvers() -> None:
    """`${project_root:}` is the repository root, `${div_ceil:a,b}` ceil(a / b), `${min:a,b}` the
    smaller, and `${token:}` 6 random hex digits, the same everywhere in one config (and in
    the jobs of a sweep, which inherit the sweep's cache), so that runs started in the same
    second still get folders of their own."""
    if not OmegaConf.has_resolver("project_root"):
        OmegaConf.register_new_resolver("project_root", lambda: str(PROJECT_ROOT))
    if not OmegaConf.has_resolver("div_ceil"):
        OmegaConf.register_new_resolver("div_ceil", lambda a, b: math.ceil(int(a) / int(b)))
    if not OmegaConf.has_resolver("min"):
        OmegaConf.register_new_resolver("min", lambda *values: min(int(v) for v in values))
    if not OmegaConf.has_resolver("token"):
        OmegaConf.register_new_resolver("token", lambda: secrets.token_hex(3), use_cache=True)
