"""A reward the untrained tiny model earns some of the time, for end-to-end tests.

The untrained byte-level model writes random bytes: exact-answer accuracy is 0 for every
completion, so every advantage is 0 and no update moves a weight. The share of printable
ASCII characters differs between almost any two of its completions, so with this reward added
every group has non-zero advantages and every update moves the weights.
"""

from __future__ import annotations

from typing import Any

# Added to a run's config on the command line or in `make_cfg`: `reward.functions.printable`.
OVERRIDES = ["+reward.functions.printable._target_=tests.helpers.dense_reward.PrintableShare"]


class PrintableShare:
    """Share of the outcome's characters that are printable ASCII (0 for an empty outcome)."""

    def __call__(self, outcomes: list[str], rows: list[dict[str, Any]]) -> list[float]:
        return [
            sum(char.isascii() and char.isprintable() for char in text) / len(text) if text else 0.0
            for text in outcomes
        ]
