"""Weighted combination of reward functions; each one's scores stay visible for logging."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import torch
from torch import Tensor

RewardFunction = Callable[[list[str], list[dict[str, Any]]], list[float]]


class CombinedReward:
    """Scores outcomes with every function and sums them with `weights` (default 1 each).

    Choosing several reward configs (`reward=[accuracy,format]`) merges their `functions` and
    `weights` maps into one of these.
    """

    def __init__(
        self, functions: dict[str, RewardFunction], weights: dict[str, float] | None = None
    ):
        if not functions:
            raise ValueError("reward.functions is empty: choose at least one reward")
        weights = dict(weights or {})
        unknown = set(weights) - set(functions)
        if unknown:
            raise ValueError(f"reward.weights names functions that do not exist: {sorted(unknown)}")
        self.functions = dict(functions)
        self.weights = {name: float(weights.get(name, 1.0)) for name in self.functions}

    def __call__(
        self, outcomes: list[str], rows: list[dict[str, Any]]
    ) -> tuple[Tensor, dict[str, Tensor]]:
        """Total reward [N] and each function's raw scores [N]; rows align with outcomes."""
        per_function = {}
        for name, function in self.functions.items():
            scores = list(function(outcomes, rows))
            if len(scores) != len(outcomes):
                raise ValueError(
                    f"reward function {name!r} returned {len(scores)} scores for {len(outcomes)} outcomes"
                )
            bad = [s for s in scores if s is None or not math.isfinite(float(s))]
            if bad:
                raise ValueError(
                    f"reward function {name!r} returned non-finite scores, e.g. {bad[0]!r}"
                )
            per_function[name] = torch.tensor(scores, dtype=torch.float32)
        total = sum(self.weights[name] * scores for name, scores in per_function.items())
        return total, per_function
