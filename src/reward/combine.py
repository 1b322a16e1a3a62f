"""Weighted combination of reward functions; each one's scores stay visible for logging."""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple, Protocol, runtime_checkable

import torch
from torch import Tensor

from src.utils.errors import ConfigError, UserError

log = logging.getLogger(__name__)

RewardFunction = Callable[[list[str], list[dict[str, Any]]], list[float]]


@runtime_checkable
class NeedsRowFields(Protocol):
    """A reward function that can score only rows where these fields are non-empty (accuracy
    needs a gold final answer); rows without them are dropped and counted before training."""

    required_fields: tuple[str, ...]


@runtime_checkable
class ScoresLengths(Protocol):
    """A reward function of the completions' token counts (EOS included) alone, such as DAPO's
    overlong penalty: it is given the sampled lengths instead of the outcomes."""

    def score_lengths(self, lengths: Sequence[int]) -> list[float]: ...


@runtime_checkable
class ScoresDetails(Protocol):
    """A reward function of what the role reported doing per completion (`Outcomes.details`,
    e.g. a rewriter's `gold_retrieved`): it is given those instead of the outcomes."""

    def score_details(self, details: Sequence[dict[str, Any]]) -> list[float]: ...


class RewardError(RuntimeError):
    """A reward function raised, or returned a score that is not a finite number."""


class Scores(NamedTuple):
    """What scoring a batch of outcomes gives."""

    total: Tensor  # [N] weighted sum
    parts: dict[str, Tensor]  # [N] per reward function
    errors: dict[str, int]  # per function: outcomes scored 0 because it raised or gave no number


def _finite(score: Any) -> bool:
    try:
        return score is not None and math.isfinite(float(score))
    except (TypeError, ValueError):
        return False


class CombinedReward:
    """Scores outcomes with every function and sums them with `weights` (default 1 each).

    Choosing several reward configs (`reward=[accuracy,format]`) merges their `functions` and
    `weights` maps into one of these. `on_error` says what a function that raises or returns
    NaN/None does: `raise` stops the run with the function's name and the outcome; `zero`
    scores those outcomes 0, counts them (`rewards/<name>/errors`) and warns once per function.
    """

    def __init__(
        self,
        functions: dict[str, RewardFunction],
        weights: dict[str, float] | None = None,
        on_error: str = "raise",
    ):
        if not functions:
            raise ConfigError("reward.functions is empty: choose at least one reward")
        weights = dict(weights or {})
        unknown = set(weights) - set(functions)
        if unknown:
            raise ConfigError(
                f"reward.weights names functions that do not exist: {sorted(unknown)}"
            )
        self.functions = dict(functions)
        self.weights = {name: float(weights.get(name, 1.0)) for name in self.functions}
        self.on_error = on_error
        self._warned: set[str] = set()

    def required_fields(self) -> dict[str, str]:
        """Row field -> the name of the function that needs it non-empty."""
        return {
            field: name
            for name, function in self.functions.items()
            if isinstance(function, NeedsRowFields)
            for field in function.required_fields
        }

    def __call__(
        self,
        outcomes: list[str],
        rows: list[dict[str, Any]],
        lengths: Sequence[int] | None = None,
        details: Sequence[dict[str, Any]] | None = None,
    ) -> Scores:
        """Total reward [N], each function's scores [N] and error counts; rows, `lengths`
        (the completions' token counts, for `ScoresLengths` functions) and `details` (what the
        role did per completion, for `ScoresDetails` functions) align with outcomes."""
        parts, errors = {}, {}
        for name, function in self.functions.items():
            if isinstance(function, ScoresDetails):
                if details is None or len(details) != len(outcomes):
                    raise ValueError(
                        f"reward function {name!r} scores the role's details: pass one per outcome"
                    )
                scores, errors[name] = function.score_details(details), 0
            elif isinstance(function, ScoresLengths):
                if lengths is None or len(lengths) != len(outcomes):
                    raise ValueError(
                        f"reward function {name!r} scores token counts: pass one per outcome"
                    )
                scores, errors[name] = function.score_lengths([int(n) for n in lengths]), 0
            else:
                scores, errors[name] = self._score(name, function, outcomes, rows)
            parts[name] = torch.tensor(scores, dtype=torch.float32)
        total = sum(self.weights[name] * scores for name, scores in parts.items())
        return Scores(total, parts, errors)

    def _score(
        self, name: str, function: RewardFunction, outcomes: list[str], rows: list[dict[str, Any]]
    ) -> tuple[list[float], int]:
        """One function's scores with failures handled by `on_error`, and how many failed."""
        try:
            scores = list(function(outcomes, rows))
        except UserError:
            raise  # a setting that cannot work (e.g. a judge model that is not there), not a bad outcome
        except Exception as error:
            if self.on_error == "raise":
                raise RewardError(
                    f"reward function {name!r} raised {type(error).__name__}: {error} "
                    "(reward.on_error=zero scores such outcomes 0 and counts them)"
                ) from error
            scores = [
                self._score_one(name, function, outcome, row)
                for outcome, row in zip(outcomes, rows, strict=True)
            ]
        if len(scores) != len(outcomes):
            raise ValueError(
                f"reward function {name!r} returned {len(scores)} scores for {len(outcomes)} outcomes"
            )
        bad = [i for i, score in enumerate(scores) if not _finite(score)]
        if bad and self.on_error == "raise":
            raise RewardError(
                f"reward function {name!r} returned {scores[bad[0]]!r} for the outcome "
                f"{outcomes[bad[0]]!r}: scores must be finite numbers "
                "(reward.on_error=zero scores such outcomes 0 and counts them)"
            )
        if bad and name not in self._warned:
            self._warned.add(name)
            log.warning(
                "reward function %r failed on %d of %d outcomes (e.g. %r); scored 0 and counted "
                "in rewards/%s/errors",
                name,
                len(bad),
                len(outcomes),
                outcomes[bad[0]][:200],
                name,
            )
        failed = set(bad)
        return [0.0 if i in failed else float(s) for i, s in enumerate(scores)], len(bad)

    @staticmethod
    def _score_one(name: str, function: RewardFunction, outcome: str, row: dict[str, Any]) -> Any:
        """Score a single outcome, to tell which ones make a function raise; None if it does."""
        try:
            (score,) = function([outcome], [row])
        except Exception:
            return None
        return score
