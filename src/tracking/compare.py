"""Compare the runs of a sweep from MLflow: curves per configuration and final-metric tables.

`notebooks/compare_runs.ipynb` is a thin page over these functions, so that what it shows is
tested code. A "configuration" is one job's set of swept values (tags `sweep.<key>`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pandas as pd
from mlflow import MlflowClient

from src.tracking.sweep import sweep_children


class NoRunsFound(LookupError):
    """The experiment or sweep asked for has no runs to compare."""


def sweep_ids(client: MlflowClient, experiment: str) -> list[str]:
    """The experiment's sweeps, newest first (from their parent runs)."""
    found = client.get_experiment_by_name(experiment)
    if found is None:
        raise NoRunsFound(f"no MLflow experiment named '{experiment}' in {client.tracking_uri}")
    parents = client.search_runs(
        [found.experiment_id],
        filter_string="tags.sweep_role = 'parent'",
        order_by=["attributes.start_time DESC"],
        max_results=50000,
    )
    return [run.data.tags["sweep_id"] for run in parents]


def load_runs(client: MlflowClient, experiment: str, sweep_id: str | None = None) -> pd.DataFrame:
    """One row per job of the sweep (the newest sweep when `sweep_id` is None): run id, name,
    status, job number, one column per swept key, and the sweep's config choices.

    Rows are ordered by job; the parent run is left out.
    """
    if sweep_id is None:
        ids = sweep_ids(client, experiment)
        if not ids:
            raise NoRunsFound(
                f"experiment '{experiment}' has no sweep yet: run `python -m src.train -m ...`"
            )
        sweep_id = ids[0]
    experiment_id = client.get_experiment_by_name(experiment).experiment_id
    runs = sweep_children(client, experiment_id, sweep_id)
    if not runs:
        raise NoRunsFound(f"sweep '{sweep_id}' has no job runs in experiment '{experiment}'")
    rows = []
    for run in runs:
        tags = run.data.tags
        rows.append(
            {
                "run_id": run.info.run_id,
                "run_name": run.info.run_name,
                "status": run.info.status,
                "job": int(tags.get("sweep_job", -1)),
                "sweep_id": sweep_id,
                **{key: value for key, value in tags.items() if key.startswith("sweep.")},
            }
        )
    frame = pd.DataFrame(rows).sort_values("job").reset_index(drop=True)
    for column in swept_columns(frame):
        numbers = pd.to_numeric(frame[column], errors="coerce")
        if numbers.notna().all():  # 0.02 and 0.1 sort as numbers, not as text
            frame[column] = numbers
    return frame


def swept_columns(runs: pd.DataFrame) -> list[str]:
    """The `sweep.<key>` columns of `load_runs`, in the order the sweep named them."""
    return [column for column in runs.columns if column.startswith("sweep.")]


def configuration(row: pd.Series, columns: Sequence[str]) -> str:
    """A short label of one job's swept values: 'kl_beta=0.1 group_size=4'."""
    return " ".join(f"{column.rsplit('.', 1)[-1]}={row[column]}" for column in columns) or str(
        row["run_name"]
    )


def metric_histories(
    client: MlflowClient, runs: pd.DataFrame, metrics: Sequence[str]
) -> pd.DataFrame:
    """Every logged value of `metrics` for every run: columns run_id, metric, step, value."""
    rows: list[dict[str, Any]] = []
    for run_id in runs["run_id"]:
        for metric in metrics:
            rows += [
                {"run_id": run_id, "metric": metric, "step": point.step, "value": point.value}
                for point in client.get_metric_history(run_id, metric)
            ]
    frame = pd.DataFrame(rows, columns=["run_id", "metric", "step", "value"])
    return frame.sort_values(["run_id", "metric", "step"]).reset_index(drop=True)


def plot_metrics(runs: pd.DataFrame, histories: pd.DataFrame, metrics: Sequence[str]) -> Any:
    """One panel per metric, one line per configuration, metric against step; returns a
    matplotlib Figure kept out of pyplot's global state (shown once, by `display` or as a
    cell's value; `figure.savefig(path)` writes it)."""
    from matplotlib.figure import Figure

    columns = swept_columns(runs)
    figure = Figure(figsize=(6 * len(metrics), 4), layout="constrained")
    axes = figure.subplots(1, len(metrics), squeeze=False)
    for axis, metric in zip(axes[0], metrics, strict=True):
        for _, run in runs.iterrows():
            points = histories[(histories.run_id == run.run_id) & (histories.metric == metric)]
            if points.empty:
                continue
            style = "-" if run.status == "FINISHED" else ":"
            marker = "o" if len(points) <= 25 else None  # dots only where they can be told apart
            axis.plot(
                points.step, points.value, style, marker=marker, label=configuration(run, columns)
            )
        axis.set_title(metric)
        axis.set_xlabel("step")
        axis.grid(alpha=0.3)
    handles, labels = axes[0][0].get_legend_handles_labels()
    if handles:
        figure.legend(handles, labels, loc="outside right upper", fontsize="small")
    figure.suptitle(f"sweep {runs['sweep_id'].iloc[0]}")
    return figure


def final_table(
    runs: pd.DataFrame, histories: pd.DataFrame, metrics: Sequence[str]
) -> pd.DataFrame:
    """One row per job: its swept values, status, and the last logged value of each metric."""
    last = (
        histories.sort_values("step")
        .groupby(["run_id", "metric"])["value"]
        .last()
        .unstack("metric")
        .reindex(columns=list(metrics))
    )
    table = runs.set_index("run_id")[["job", *swept_columns(runs), "status"]].join(last)
    table.columns = [column.removeprefix("sweep.") for column in table.columns]
    return table.reset_index(drop=True).set_index("job")


def by_swept_value(table: pd.DataFrame, key: str, metrics: Sequence[str]) -> pd.DataFrame:
    """Final metrics averaged over the finished jobs sharing each value of one swept key,
    with the count of jobs behind each mean."""
    finished = table[table.status == "FINISHED"]
    grouped = finished.groupby(key)[list(metrics)]
    return grouped.mean().join(grouped.size().rename("jobs"))
