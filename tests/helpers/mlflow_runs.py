"""Reading a test run's MLflow record back, from the composed config that made it."""

from __future__ import annotations

from typing import Any

import mlflow

from src.tracking.store import sqlite_file


def runs_in(tracking_uri: str, experiment: str) -> list[mlflow.entities.Run]:
    """Every run of `experiment` in the store at `tracking_uri`, oldest first."""
    client = mlflow.MlflowClient(tracking_uri=tracking_uri)
    found = client.get_experiment_by_name(experiment)
    assert found is not None, f"no experiment {experiment!r} in {tracking_uri}"
    return client.search_runs([found.experiment_id], order_by=["attributes.start_time ASC"])


def runs(cfg: Any) -> list[mlflow.entities.Run]:
    """Every run of the config's task, oldest first."""
    return runs_in(cfg.paths.mlflow_uri, cfg.task_name)


def only_run(cfg: Any) -> mlflow.entities.Run:
    """The one run of the config's task (fails when there are several)."""
    (run,) = runs(cfg)
    return run


def history(cfg: Any, run: mlflow.entities.Run, name: str) -> dict[int, float]:
    """step -> value of a metric of `run` (the last value where a step repeats)."""
    client = mlflow.MlflowClient(tracking_uri=cfg.paths.mlflow_uri)
    return {m.step: m.value for m in client.get_metric_history(run.info.run_id, name)}


def nothing_recorded(cfg: Any) -> bool:
    """Whether the config's store holds no experiment of its own and no run: absent, or the
    empty store a test started from."""
    database = sqlite_file(cfg.paths.mlflow_uri)
    if database is None or not database.exists():
        return True
    client = mlflow.MlflowClient(tracking_uri=cfg.paths.mlflow_uri)
    experiments = client.search_experiments()
    ids = [experiment.experiment_id for experiment in experiments]
    return [e.name for e in experiments] == ["Default"] and not client.search_runs(ids)
