"""Runs started together on a new SQLite tracking store: one creates the tables, the others
wait for it (src/tracking/store.py)."""

from __future__ import annotations

import fcntl
import multiprocessing
from pathlib import Path

import pytest

from src.tracking.store import sqlite_file, store_lock

RUNS = 3  # unlocked, two of three such openings failed on a 2-core CPU


@pytest.mark.parametrize(
    ("uri", "expected"),
    [
        ("sqlite:////tmp/out/mlflow.db", Path("/tmp/out/mlflow.db")),
        ("sqlite:///outputs/mlflow.db?timeout=30", Path("outputs/mlflow.db")),
        ("sqlite:///:memory:", None),
        ("http://127.0.0.1:5000", None),
        ("file:///tmp/mlruns", None),
        ("databricks", None),
        (None, None),
    ],
)
def test_sqlite_file(uri: str | None, expected: Path | None) -> None:
    assert sqlite_file(uri) == expected


def test_the_lock_is_exclusive_and_released(tmp_path: Path) -> None:
    uri = f"sqlite:///{tmp_path}/sub/mlflow.db"
    lock = tmp_path / "sub" / "mlflow.db.lock"
    # a second open file of the lock, which flock treats as another holder
    with store_lock(uri), open(lock) as other, pytest.raises(BlockingIOError):
        fcntl.flock(other, fcntl.LOCK_EX | fcntl.LOCK_NB)
    with open(lock) as other:
        fcntl.flock(other, fcntl.LOCK_EX | fcntl.LOCK_NB)  # free again


def open_run(uri: str, barrier: multiprocessing.synchronize.Barrier, results: dict) -> None:
    """One job: the store and its experiment opened as a run's logger opens them, then a run
    written to it."""
    from mlflow import MlflowClient

    from src.tracking.store import ensure_store

    barrier.wait()  # every process has imported MLflow; they open the store together
    try:
        ensure_store(uri, "together")
        client = MlflowClient(tracking_uri=uri)
        run = client.create_run(client.get_experiment_by_name("together").experiment_id)
        client.log_metric(run.info.run_id, "x", 1.0, step=0)
        client.set_terminated(run.info.run_id)
        results[multiprocessing.current_process().name] = "ok"
    except Exception as error:  # reported to the test, which names it
        results[multiprocessing.current_process().name] = f"{type(error).__name__}: {error}"


@pytest.mark.slow  # processes started together on one store: 7-10 s
def test_runs_of_a_new_experiment_opened_together_on_a_new_store_all_start(tmp_path: Path) -> None:
    uri = f"sqlite:///{tmp_path}/mlflow.db"
    context = multiprocessing.get_context("spawn")
    with context.Manager() as manager:
        barrier, results = manager.Barrier(RUNS), manager.dict()
        processes = [
            context.Process(target=open_run, args=(uri, barrier, results), name=f"run{i}")
            for i in range(RUNS)
        ]
        for process in processes:
            process.start()
        for process in processes:
            process.join(timeout=120)
        outcome = dict(results)
    assert outcome == {f"run{i}": "ok" for i in range(RUNS)}

    from mlflow import MlflowClient

    client = MlflowClient(tracking_uri=uri)
    runs = client.search_runs([client.get_experiment_by_name("together").experiment_id])
    assert len(runs) == RUNS and {run.info.status for run in runs} == {"FINISHED"}


def test_a_runs_logger_opens_its_store_first(tmp_path: Path, monkeypatch) -> None:
    from src.tracking import run_logger

    opened = []
    monkeypatch.setattr(run_logger, "ensure_store", lambda *args: opened.append(args))
    uri = f"sqlite:///{tmp_path}/mlflow.db"
    run_logger.MLflowRunLogger(experiment_name="one", tracking_uri=uri, artifact_location="a")
    assert opened == [(uri, "one", "a")]
