"""The comparison's figures, from `over_seeds` tables: interval estimates per configuration, the
performance profile, and the curves' mean with their interval band over steps. Each returns a
matplotlib Figure kept out of pyplot's global state (`figure.savefig(path)` writes it)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from src.tracking import intervals

PROFILE_POINTS = 41  # thresholds of the performance profile across the scores' range


def new_figure(width: float, height: float) -> Any:
    from matplotlib.figure import Figure

    return Figure(figsize=(width, height), layout="constrained")


def plot_intervals(table: pd.DataFrame, metric: str) -> Any:
    """One panel per aggregate (IQM, mean): each configuration's point and 95 % interval."""
    names = list(intervals.AGGREGATES)
    figure = new_figure(4 * len(names), 0.6 * len(table) + 1.5)
    axes = figure.subplots(1, len(names), squeeze=False, sharey=True)[0]
    positions = np.arange(len(table))
    for axis, name in zip(axes, names, strict=True):
        low = (table[name] - table[f"{name} low"]).fillna(0).to_numpy()
        high = (table[f"{name} high"] - table[name]).fillna(0).to_numpy()
        axis.errorbar(table[name], positions, xerr=[low, high], fmt="o", capsize=4)
        axis.set_yticks(positions, [str(label) for label in table.index])
        axis.set_title(name)
        axis.set_xlabel(metric)
        axis.grid(alpha=0.3, axis="x")
    figure.suptitle(f"{metric}: 95 % stratified bootstrap intervals over seeds")
    return figure


def plot_profiles(
    scores: Mapping[str, Sequence[np.ndarray]], metric: str, reps: int = 500, seed: int = 0
) -> Any:
    """The share of runs scoring above each threshold, per configuration, with its band."""
    values = np.concatenate([np.concatenate(list(runs)) for runs in scores.values()])
    thresholds = np.linspace(values.min(), values.max(), PROFILE_POINTS)
    figure = new_figure(6, 4)
    axis = figure.subplots()
    for config, runs in scores.items():
        profile = intervals.performance_profile(list(runs), thresholds, reps, seed)
        points = [p.point for p in profile]
        axis.plot(thresholds, points, label=config)
        low = [p.point if np.isnan(p.low) else p.low for p in profile]
        high = [p.point if np.isnan(p.high) else p.high for p in profile]
        axis.fill_between(thresholds, low, high, alpha=0.2)
    axis.set_xlabel(f"{metric} (tau)")
    axis.set_ylabel(f"share of runs with {metric} > tau")
    axis.grid(alpha=0.3)
    axis.legend(fontsize="small")
    axis.set_title("performance profile")
    return figure


def plot_bands(bands: pd.DataFrame, metric: str) -> Any:
    """Each configuration's mean of `metric` against step, with its 95 % band over seeds."""
    figure = new_figure(6, 4)
    axis = figure.subplots()
    for config, band in bands.groupby("configuration", sort=False):
        axis.plot(band.step, band["mean"], label=str(config))
        axis.fill_between(
            band.step,
            band["low"].fillna(band["mean"]),
            band["high"].fillna(band["mean"]),
            alpha=0.2,
        )
    axis.set_xlabel("step")
    axis.set_ylabel(metric)
    axis.grid(alpha=0.3)
    axis.legend(fontsize="small")
    axis.set_title(f"{metric}: mean over seeds and 95 % band")
    return figure
