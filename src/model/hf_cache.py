"""The name transformers gives the key/value cache of a forward: `cache` from 5.24 on, and
`past_key_values` before (5.24 still takes the old name, with a deprecation warning, until
5.40). A forward is called, and its output read, by the installed release's name."""

from __future__ import annotations

from typing import Any

from transformers.modeling_outputs import CausalLMOutputWithPast

# the keyword a model forward takes its cache by, and the output field that returns it
CACHE: str = (
    "cache" if "cache" in CausalLMOutputWithPast.__dataclass_fields__ else "past_key_values"
)


def cache_argument(cache: Any) -> dict[str, Any]:
    """The keyword argument that hands `cache` to a model forward."""
    return {CACHE: cache}


def returned_cache(output: Any) -> Any:
    """The cache a model forward returned (called with `use_cache=True`)."""
    return getattr(output, CACHE)
