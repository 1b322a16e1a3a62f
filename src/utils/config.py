"""Config nodes handed to code outside OmegaConf: as plain Python, never as OmegaConf objects."""

from __future__ import annotations

from typing import Any

from hydra.utils import instantiate
from omegaconf import OmegaConf


def plain(node: Any) -> Any:
    """A config node as plain dicts and lists, resolved where its interpolations allow (a
    `${hydra:...}` outside a Hydra job stays as written); anything else unchanged."""
    if not OmegaConf.is_config(node):
        return node
    try:
        return OmegaConf.to_container(node, resolve=True)
    except Exception:
        return OmegaConf.to_container(node, resolve=False)


def build(node: Any, **kwargs: Any) -> Any:
    """`instantiate` whose arguments arrive as plain lists and dicts, so that a library never
    receives a ListConfig (peft writes its LoRA settings to JSON, which fails on one)."""
    return instantiate(node, _convert_="all", **kwargs)
