"""Aggregates over seeds with interval estimates, as rliable reports them (Agarwal et al. 2021,
"Deep Reinforcement Learning at the Edge of the Statistical Precipice"), on scipy's bootstrap.

A configuration's scores are one array of runs (seeds) per task: `[array([0.8, 0.9, 0.7])]` for
one task, several arrays (of any lengths) for several tasks; a (runs, tasks) array or a flat
list of one task's runs is read the same way (`by_task`). The formulas, stated in
docs/comparisons.md:

- IQM: the mean of the middle half of all runs x tasks scores (a 25 % trimmed mean), robust to
  one seed that diverged and less noisy than the median.
- mean: the plain mean of all scores.
- interval: the 95 % percentile interval of the statistic over stratified bootstrap resamples:
  each task's runs resampled with replacement on their own (tasks never mix), the statistic
  computed on the whole resampled table, `reps` times.
- probability of improvement of X over Y: per task, P(x > y) + P(x = y) / 2 over every pair of
  a run of X and a run of Y (the Mann-Whitney statistic over n m), averaged over tasks; its
  interval resamples X's and Y's runs independently within each task.
- performance profile: for each threshold tau, the share of runs x tasks scoring above tau.

rliable itself is not used: its one release requires `arch<8`, whose 7.x releases no longer
import beside pandas 3, and `arch` 8 refuses the keyword rliable passes. scipy's bootstrap (a
dependency already) resamples each of several samples independently, which is the stratified
bootstrap when each task's runs are one sample.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
from scipy import stats

REPS = 2000  # bootstrap resamples (rliable's default is 50,000; 2,000 keep a few seconds on a CPU)
CONFIDENCE = 0.95  # the intervals' coverage
TRIM = 0.25  # IQM: a quarter cut from each end


@dataclass(frozen=True)
class Estimate:
    """A point estimate and its interval (NaN bounds where one run cannot give an interval)."""

    point: float
    low: float
    high: float

    def __str__(self) -> str:
        if np.isnan(self.low):
            return f"{self.point:.3f} (one run: no interval)"
        return f"{self.point:.3f} [{self.low:.3f}, {self.high:.3f}]"


Scores = np.ndarray | Sequence[float] | Sequence[np.ndarray]  # see the module docstring


def by_task(scores: Scores) -> list[np.ndarray]:
    """One float array of runs per task: a flat list or 1-D array is one task's runs, a 2-D
    array is (runs, tasks), a list of arrays is one array per task."""
    if isinstance(scores, np.ndarray):
        array = scores.astype(float)
        if array.ndim > 2:
            raise ValueError(f"scores must be (runs,) or (runs, tasks), got shape {array.shape}")
        tasks = [array] if array.ndim == 1 else [array[:, t] for t in range(array.shape[1])]
    elif len(scores) and all(isinstance(item, np.ndarray) for item in scores):
        tasks = [np.asarray(item, dtype=float).reshape(-1) for item in scores]
    else:
        tasks = [np.asarray(scores, dtype=float).reshape(-1)]
    if not tasks or any(task.size == 0 for task in tasks):
        raise ValueError("every task needs at least one run's score")
    if any(np.isnan(task).any() for task in tasks):
        raise ValueError("scores hold NaN: a run without the metric must be left out, not scored")
    return tasks


def iqm(scores: np.ndarray, axis: int = -1) -> np.ndarray:
    """The interquartile mean along `axis` (every score of the runs x tasks flattened there)."""
    return stats.trim_mean(scores, TRIM, axis=axis)


def mean(scores: np.ndarray, axis: int = -1) -> np.ndarray:
    """The plain mean along `axis`."""
    return np.mean(scores, axis=axis)


AGGREGATES: dict[str, Callable[..., np.ndarray]] = {"IQM": iqm, "mean": mean}


def interval(
    scores: Scores,
    aggregate: Callable[..., np.ndarray],
    reps: int = REPS,
    seed: int = 0,
) -> Estimate:
    """`aggregate` of every task's runs together and its stratified bootstrap interval."""
    columns = tuple(by_task(scores))
    point = float(aggregate(np.concatenate(columns)))
    if min(column.size for column in columns) < 2:
        return Estimate(point, float("nan"), float("nan"))

    def statistic(*resampled: np.ndarray, axis: int = -1) -> np.ndarray:
        return aggregate(np.concatenate(resampled, axis=axis), axis=axis)

    return bootstrapped(columns, statistic, point, reps, seed)


def bootstrapped(
    samples: tuple[np.ndarray, ...],
    statistic: Callable[..., np.ndarray],
    point: float,
    reps: int,
    seed: int,
) -> Estimate:
    """`point` with the 95 % percentile interval of `statistic` over bootstrap resamples of
    `samples`, each resampled on its own (the stratified bootstrap); a degenerate interval
    (every resample alike) is the point."""
    found = stats.bootstrap(
        samples,
        statistic,
        n_resamples=reps,
        confidence_level=CONFIDENCE,
        method="percentile",
        paired=False,
        vectorized=True,
        rng=np.random.default_rng(seed),
    ).confidence_interval
    low, high = float(found.low), float(found.high)
    return Estimate(point, *((point, point) if np.isnan(low) or np.isnan(high) else (low, high)))


def improvement(x: np.ndarray, y: np.ndarray, axis: int = -1) -> np.ndarray:
    """P(x > y) + P(x = y) / 2 over every pair of a score of `x` and one of `y` (one task)."""
    left, right = np.expand_dims(x, axis=-1), np.expand_dims(y, axis=-2)
    wins = (left > right).astype(float) + 0.5 * (left == right)
    return wins.mean(axis=(-2, -1))


def probability_of_improvement(x: Scores, y: Scores, reps: int = REPS, seed: int = 0) -> Estimate:
    """The probability that a run of X scores above a run of Y, averaged over tasks, with its
    interval (X's and Y's runs resampled independently within each task)."""
    xs, ys = by_task(x), by_task(y)
    if len(xs) != len(ys):
        raise ValueError(f"X has {len(xs)} tasks and Y {len(ys)}: compare the same tasks")
    tasks = len(xs)
    point = float(np.mean([improvement(a, b) for a, b in zip(xs, ys, strict=True)]))
    if min(a.size for a in (*xs, *ys)) < 2:
        return Estimate(point, float("nan"), float("nan"))
    samples = tuple(column for pair in zip(xs, ys, strict=True) for column in pair)

    def statistic(*resampled: np.ndarray, axis: int = -1) -> np.ndarray:
        pairs = [improvement(resampled[2 * t], resampled[2 * t + 1]) for t in range(tasks)]
        return np.mean(pairs, axis=0)

    return bootstrapped(samples, statistic, point, reps, seed)


def performance_profile(
    scores: Scores, thresholds: Sequence[float], reps: int = REPS, seed: int = 0
) -> list[Estimate]:
    """For each threshold tau, the share of runs x tasks scoring above tau, with its interval."""
    return [
        interval(scores, lambda s, axis=-1, tau=tau: np.mean(s > tau, axis=axis), reps, seed)
        for tau in thresholds
    ]


def estimates(
    scores: Mapping[str, np.ndarray], reps: int = REPS, seed: int = 0
) -> dict[str, dict[str, Estimate]]:
    """{configuration: {aggregate: Estimate}} for every aggregate of AGGREGATES."""
    return {
        name: {
            label: interval(table, aggregate, reps, seed) for label, aggregate in AGGREGATES.items()
        }
        for name, table in scores.items()
    }
