"""A mapping that keeps only its most recently written keys: what a role or tool remembers of
the rows and searches it has seen, bounded so a long run does not grow it without end."""

from __future__ import annotations

from collections import OrderedDict
from typing import TypeVar

K = TypeVar("K")
V = TypeVar("V")


def keep_recent(memory: OrderedDict[K, V], key: K, value: V, limit: int) -> None:
    """Write `value` under `key` as the newest entry, forgetting the oldest past `limit`."""
    memory[key] = value
    memory.move_to_end(key)
    while len(memory) > limit:
        memory.popitem(last=False)
