"""OmegaConf resolvers the configs use; registered once when `src` is imported."""

from __future__ import annotations

import math
import secrets
from pathlib import Path

from omegaconf import OmegaConf

PROJECT_ROOT = Path(__file__).resolve().parents[2]


def register_resolvers() -> None:
    """`${project_root:}` is the repository root, `${div_ceil:a,b}` ceil(a / b) (null while a is
    null: a run length still to come from `epochs`), `${min:a,b}` the smallest of the values
    that are set, `${is_null:x}` whether x is null, and `${token:}` 6 random hex digits, the same everywhere in one config (and in
    the jobs of a sweep, which inherit the sweep's cache), so that runs started in the same
    second still get folders of their own."""
    if not OmegaConf.has_resolver("project_root"):
        OmegaConf.register_new_resolver("project_root", lambda: str(PROJECT_ROOT))
    if not OmegaConf.has_resolver("div_ceil"):
        OmegaConf.register_new_resolver("div_ceil", div_ceil)
    if not OmegaConf.has_resolver("min"):
        OmegaConf.register_new_resolver(
            "min", lambda *values: min(int(v) for v in values if v is not None)
        )
    if not OmegaConf.has_resolver("is_null"):
        OmegaConf.register_new_resolver("is_null", lambda value: value is None)
    if not OmegaConf.has_resolver("token"):
        OmegaConf.register_new_resolver("token", lambda: secrets.token_hex(3), use_cache=True)


def div_ceil(a: int | None, b: int) -> int | None:
    """ceil(a / b), or None while `a` is not known yet."""
    return None if a is None else math.ceil(int(a) / int(b))
