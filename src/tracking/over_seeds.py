"""A sweep's configurations compared over their seeds: each configuration is the swept keys
other than `seed`, its runs are its seeds, and its score is summed up with an interval
(src/tracking/intervals.py). `python -m src.compare` and `notebooks/compare_runs.ipynb` both
call these functions.

Several tasks (one experiment each) are strata: a configuration's runs of each task are resampled
on their own. Frames are `compare.load_runs` tables with an `experiment` column added.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from src.tracking import intervals
from src.tracking.compare import swept_columns
from src.tracking.sweep import ONE_CONFIGURATION, SEED_KEY

SEED_COLUMN = f"sweep.{SEED_KEY}"


class UnknownConfiguration(LookupError):
    """A configuration named (e.g. as the baseline) that the sweep does not have."""


def configuration_columns(runs: pd.DataFrame) -> list[str]:
    """The swept columns that make a configuration: every one but the seed's."""
    return [column for column in swept_columns(runs) if column != SEED_COLUMN]


def configuration_labels(runs: pd.DataFrame) -> pd.Series:
    """Each run's configuration, e.g. `algo=dapo kl_beta=0.1` (the seed left out)."""
    columns = configuration_columns(runs)
    if not columns:
        return pd.Series(ONE_CONFIGURATION, index=runs.index)
    return runs[columns].apply(
        lambda row: " ".join(f"{c.removeprefix('sweep.')}={shown(row[c])}" for c in columns),
        axis=1,
    )


def shown(value: object) -> str:
    """A swept value as the command line gave it: 4, not 4.0 (numeric columns hold floats)."""
    return f"{value:g}" if isinstance(value, float) else str(value)


def last_values(histories: pd.DataFrame, metric: str) -> pd.Series:
    """Each run's last logged value of `metric` (run id -> value)."""
    points = histories[histories.metric == metric].sort_values("step")
    return points.groupby("run_id")["value"].last()


def final_scores(
    runs: pd.DataFrame, histories: pd.DataFrame, metric: str
) -> dict[str, list[np.ndarray]]:
    """{configuration: one array of its finished runs' final `metric` per task}; runs without
    the metric are left out, and a configuration missing from a task is left out whole (a
    comparison over tasks needs every task)."""
    finished = runs[runs.status == "FINISHED"].assign(config=configuration_labels(runs))
    values = last_values(histories, metric)
    finished = finished[finished.run_id.isin(values.index)]
    tasks = sorted(runs["experiment"].unique()) if "experiment" in runs else [None]
    scores: dict[str, list[np.ndarray]] = {}
    for config, group in finished.groupby("config", sort=False):
        per_task = []
        for task in tasks:
            ids = group.run_id if task is None else group.run_id[group.experiment == task]
            per_task.append(values[ids].to_numpy())
        if all(runs_of_task.size for runs_of_task in per_task):
            scores[str(config)] = per_task
    return scores


def interval_table(
    scores: Mapping[str, Sequence[np.ndarray]], reps: int = intervals.REPS, seed: int = 0
) -> pd.DataFrame:
    """One row per configuration: its runs, the IQM and the mean with their 95 % intervals."""
    rows = []
    for config, found in intervals.estimates(scores, reps, seed).items():
        row: dict[str, Any] = {"configuration": config, "runs": sum(t.size for t in scores[config])}
        for name, estimate in found.items():
            row |= {
                name: estimate.point,
                f"{name} low": estimate.low,
                f"{name} high": estimate.high,
            }
        rows.append(row)
    return pd.DataFrame(rows).set_index("configuration")


def improvement_table(
    scores: Mapping[str, Sequence[np.ndarray]],
    baseline: str,
    reps: int = intervals.REPS,
    seed: int = 0,
) -> pd.DataFrame:
    """The probability that each configuration's run beats a run of `baseline`, with its 95 %
    interval; one row per other configuration."""
    if baseline not in scores:
        raise UnknownConfiguration(
            f"no configuration '{baseline}' to compare against: choose among {', '.join(scores)}"
        )
    rows = []
    for config, runs in scores.items():
        if config == baseline:
            continue
        found = intervals.probability_of_improvement(runs, scores[baseline], reps, seed)
        rows.append(
            {"configuration": config, "baseline": baseline, "P(improves)": found.point}
            | {"low": found.low, "high": found.high}
        )
    return pd.DataFrame(rows, columns=["configuration", "baseline", "P(improves)", "low", "high"])


def steps_to_reach(histories: pd.DataFrame, metric: str, threshold: float) -> pd.Series:
    """Each run's first step at which `metric` reached `threshold` (NaN where it never did)."""
    points = histories[histories.metric == metric].sort_values("step")
    reached = points[points.value >= threshold].groupby("run_id")["step"].first()
    return reached.reindex(points.run_id.unique())


def curve_band(
    runs: pd.DataFrame, histories: pd.DataFrame, metric: str, reps: int = 500, seed: int = 0
) -> pd.DataFrame:
    """Per configuration and step: the mean of `metric` over the runs logged there, and its
    95 % interval over those runs (columns configuration, step, mean, low, high, runs)."""
    labels = configuration_labels(runs)
    order = pd.Categorical(labels, categories=list(dict.fromkeys(labels)))  # the sweep's order
    labelled = histories[histories.metric == metric].merge(
        runs.assign(config=order)[["run_id", "config"]], on="run_id"
    )
    rows = []
    for (config, step), group in labelled.groupby(["config", "step"], observed=True):
        found = intervals.interval(group.value.to_numpy(), intervals.mean, reps, seed)
        rows.append(
            {"configuration": config, "step": step, "mean": found.point}
            | {"low": found.low, "high": found.high, "runs": len(group)}
        )
    return pd.DataFrame(rows, columns=["configuration", "step", "mean", "low", "high", "runs"])
