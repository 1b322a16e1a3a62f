"""Learnability sampling: training prompts drawn by p(1 - p), p a prompt's running success rate
(after Foster & Foerster et al. 2025, "Learning to Reason at the Frontier of Learnability").

A prompt the policy always or never solves gives a group whose rewards tie: nothing to learn. A
prompt solved half the time gives the most. So each training row keeps an estimate of its
success rate from the groups sampled for it, and every batch is drawn with probability

    (1 - u) * w_i / sum_j w_j + u / N,    w_i = p_i (1 - p_i)

without replacement, u the uniform share (`sampling.uniform_share`, so no prompt starves) and N
the training rows. A prompt not yet sampled weighs `sampling.unknown` (by default 0.25, the most
a prompt can weigh: every prompt gets tried). Each group updates its prompt's estimate,
p <- decay * p + (1 - decay) * (its group's success rate), the first group setting it.

Draws are reproducible and a resumed run draws what an unbroken one draws: batch b is drawn by a
generator seeded from the seed and b, from the estimates of the groups of batches up to b - 2
(`LAG`; Lightning fetches the next batch before the current one trains, so batch b - 1's groups
are never in hand when b is drawn), and the estimates and the observations not yet folded in
travel in checkpoints (`state_dict`).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, ClassVar, Protocol, runtime_checkable

import torch
from torch import Tensor

from src.data.keys import SETTINGS
from src.utils.distributed import gather_objects
from src.utils.setting import Declared

ROW_KEY = "_row"  # a drawn training row's index among the training rows
DRAW_KEY = "_draw"  # the draw's number in the whole run (batch * rows per batch + position)
LAG = 2  # batch b is drawn from the groups of batches up to b - LAG
SUCCESS = 1.0 - 1e-6  # a success function's score at or above this is a success


@dataclass(frozen=True)
class SamplingSettings(Declared):
    """`sampling.*` (conf/sampling/): how training prompts are drawn."""

    SECTION: ClassVar[str] = "sampling"
    TABLE: ClassVar[dict] = SETTINGS

    order: str = "uniform"  # uniform: random permutations; learnability: by p(1 - p)
    uniform_share: float = 0.25
    decay: float = 0.5
    unknown: float = 0.25


@runtime_checkable
class RolloutFeedback(Protocol):
    """What the training loop tells the data about each group it sampled."""

    def observe_rollout(
        self, rows: list[dict[str, Any]], parts: dict[str, Tensor], group_size: int
    ) -> dict[str, float]:
        """Take the groups of `rows` (each row repeated `group_size` times, as an episode holds
        them) with their reward functions' scores `parts`; return `sampling/*` figures."""
        ...


class Learnability:
    """Every training row's success estimate, and the draws made from them."""

    def __init__(
        self, num_rows: int, batch_size: int, settings: SamplingSettings, success: str
    ) -> None:
        self.num_rows, self.batch_size = num_rows, batch_size
        self.settings, self.success = settings, success
        self.estimates: dict[int, float] = {}  # row -> running success rate
        self.pending: dict[int, list[tuple[int, float]]] = {}  # batch -> (row, group's rate)
        self.drawn: dict[int, float] = {}  # batch -> mean weight of its rows when drawn

    def fold(self, batch: int) -> None:
        """Fold the groups of batches up to `batch` - LAG into the estimates, in batch order."""
        for done in sorted(b for b in self.pending if b <= batch - LAG):
            for row, rate in self.pending.pop(done):
                before = self.estimates.get(row)
                decay = self.settings.decay
                self.estimates[row] = (
                    rate if before is None else decay * before + (1 - decay) * rate
                )

    def weights(self) -> Tensor:
        """[N] p(1 - p) of every row's estimate; `unknown` where there is none yet."""
        weights = torch.full((self.num_rows,), float(self.settings.unknown), dtype=torch.float64)
        for row, p in self.estimates.items():
            weights[row] = p * (1 - p)
        return weights

    def probabilities(self, weights: Tensor | None = None) -> Tensor:
        """[N] each row's chance in a draw: the learnability share and the uniform share
        (`weights`: `weights()`, where the caller has them already)."""
        weights = self.weights() if weights is None else weights
        uniform = torch.full_like(weights, 1.0 / self.num_rows)
        if float(weights.sum()) <= 0.0:  # nothing known to have room: uniform
            return uniform
        share = self.settings.uniform_share
        return (1 - share) * weights / weights.sum() + share * uniform

    def draw(self, batch: int, seed: int) -> list[int]:
        """The rows of global batch `batch`: `batch_size` distinct rows (fewer rows than that:
        every row, then again), drawn by `probabilities` from a generator of (seed, batch)."""
        self.fold(batch)
        generator = torch.Generator().manual_seed(seed * 1_000_003 + batch)
        weights = self.weights()
        chances = self.probabilities(weights)
        rows: list[int] = []
        while len(rows) < self.batch_size:
            take = min(self.batch_size - len(rows), self.num_rows)
            rows += torch.multinomial(chances, take, False, generator=generator).tolist()
        self.drawn[batch] = float(weights[rows].mean())
        return rows

    def observe(
        self, rows: list[dict[str, Any]], parts: dict[str, Tensor], group_size: int
    ) -> dict[str, float]:
        """Every process's groups of this rollout noted for folding (`fold`); returns the
        `sampling/*` figures of the batch they came from."""
        scores = parts[self.success].detach().float().cpu()
        mine = []
        for start in range(0, len(rows), group_size):
            row = rows[start]
            rate = float((scores[start : start + group_size] >= SUCCESS).float().mean())
            mine.append((int(row[ROW_KEY]), int(row[DRAW_KEY]) // self.batch_size, rate))
        groups = [group for part in gather_objects(mine) for group in part]
        for row, batch, rate in groups:
            self.pending.setdefault(batch, []).append((row, rate))
        batches = {batch for _, batch, _ in groups}
        spread = [0.0 < rate < 1.0 for _, _, rate in groups]
        figures = {
            "sampling/spread_share": sum(spread) / len(spread) if spread else float("nan"),
            "sampling/known_share": len(self.estimates) / self.num_rows,
        }
        drawn = [self.drawn[batch] for batch in batches if batch in self.drawn]
        if drawn:
            figures["sampling/learnability"] = sum(drawn) / len(drawn)
        return figures

    def state_dict(self) -> dict[str, Any]:
        return {
            "estimates": dict(self.estimates),
            "pending": {batch: list(groups) for batch, groups in self.pending.items()},
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.estimates = {int(row): float(p) for row, p in state.get("estimates", {}).items()}
        self.pending = {
            int(batch): [(int(row), float(rate)) for row, rate in groups]
            for batch, groups in state.get("pending", {}).items()
        }


def learnability_batches(
    learnability: Learnability, start: int, stop: int, seed: int, share: int, first: int
) -> Iterator[list[tuple[int, int]]]:
    """Global batches `start` .. `stop` - 1, each as this process's share of `(row, draw)`
    keys (`share` rows from position `first`): every process draws the same global batch."""
    size = learnability.batch_size
    for batch in range(start, stop):
        rows = learnability.draw(batch, seed)
        yield [(rows[i], batch * size + i) for i in range(first, first + share)]
