"""A reward from what the role reported doing for a completion (its `Outcomes.details`), such as
whether a rewriter's documents held the gold answer: a shaped term beside the task's outcome."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from src.utils.errors import ConfigError


class RoleDetail:
    """Scores each completion by the role's detail `key`: 1.0 for true, 0.0 for false, a
    number as it is; a role that does not report the key is a setting error. `python -m src.train task=medqa_rewriter
    reward=[accuracy,gold_retrieved]` adds the share of documents that hold the gold answer to
    the answer's accuracy, a denser signal than the answer alone."""

    def __init__(self, key: str) -> None:
        if not isinstance(key, str) or not key:
            raise ConfigError(f"a role-detail reward needs the detail's name as key, got {key!r}")
        self.key = key

    def score_details(self, details: Sequence[dict[str, Any]]) -> list[float]:
        """One score per completion from the role's details for it."""
        scores = []
        for detail in details:
            if self.key not in detail:
                raise ConfigError(
                    f"the role reports no detail named {self.key!r} (it reports "
                    f"{sorted(detail)}): choose one of those as the reward's key"
                )
            value = detail[self.key]
            if not isinstance(value, bool | int | float):
                raise ConfigError(
                    f"the role reports {self.key}={value!r}, not a number or true/false: "
                    "choose a numeric detail for this reward"
                )
            scores.append(float(value))
        return scores
