"""Config nodes handed to code outside OmegaConf: as plain Python, never as OmegaConf objects."""

from __future__ import annotations

import hashlib
import json
from typing import Any

from hydra.utils import get_object, instantiate
from omegaconf import OmegaConf

from src.utils.errors import ConfigError


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


def settings_hash(settings: Any) -> str:
    """A short name for plain settings (dicts, lists, values; others by their text): 12 hex
    digits of the SHA-256 of their JSON with sorted keys, so the same settings in any order
    name the same cache folder."""
    text = json.dumps(settings, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def named_object(name: str, key: str, advice: str) -> Any:
    """The object a config names by its dotted path (`key`'s value: a `_target_`, a settings
    table, a check); `ConfigError` naming the key, the path, why it cannot be imported and
    `advice` where it cannot."""
    try:
        return get_object(name)
    except (ImportError, AttributeError, ValueError) as error:
        cause = error.__cause__ or error  # Hydra's error wraps the import's own in lines
        raise ConfigError(
            f"{key}: cannot import {name} ({type(cause).__name__}: {cause}); {advice}"
        ) from None
