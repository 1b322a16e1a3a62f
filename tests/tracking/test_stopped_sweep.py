"""A multirun stopped by SIGTERM or Ctrl-C: its parent MLflow run is KILLED with its children
listed, never left RUNNING."""

from __future__ import annotations

import json
import signal
from pathlib import Path

import mlflow
import pytest

from src.tracking.sweep_callback import MlflowSweepCallback
from src.utils.stopping import Stopped
from tests.helpers.signal_at_step import signal_at

from .conftest import SMALL_JOB, run_train


@pytest.mark.slow
def test_a_stopped_sweep_leaves_its_parent_killed_with_its_children_listed(tmp_path):
    """SIGTERM (what a scheduler sends) from a real sweep process; that Ctrl-C takes the same
    handler is shown in process below, and a Ctrl-C'd run's record by test_preemption.py."""
    name = "SIGTERM"
    done = run_train(
        "-m", *SMALL_JOB, "algo.kl_beta=0.0,0.1", f"paths.output_root={tmp_path}",
        *signal_at(2, name, moment="start"),  # the first job, as its step 2 begins
        timeout=600,
    )  # fmt: skip
    assert done.returncode == 128 + signal.Signals[name], done.stderr[-3000:]
    client = mlflow.MlflowClient(tracking_uri=f"sqlite:///{tmp_path}/mlflow.db")
    runs = client.search_runs([client.get_experiment_by_name("arithmetic").experiment_id])
    (parent,) = [run for run in runs if run.data.tags.get("sweep_role") == "parent"]
    (child,) = [run for run in runs if run is not parent]  # the second job never started
    assert parent.info.status == "KILLED"
    assert child.info.status == "KILLED"
    listed = json.loads(
        Path(client.download_artifacts(parent.info.run_id, "children.json")).read_text()
    )
    assert [(row["run_id"], row["status"]) for row in listed] == [(child.info.run_id, "KILLED")]
    assert parent.data.tags["jobs"] == "1"


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_the_sweep_stops_on_a_signal_and_gives_the_handlers_back(signum):
    """Outside a job's training (loading, evaluating, between jobs) the sweep's own handler
    stops it: SIGTERM's default would end the process with its parent run left RUNNING."""
    before = signal.getsignal(signum)
    callback = MlflowSweepCallback()
    callback._catch_signals()
    try:
        with pytest.raises(Stopped) as stopped:
            signal.raise_signal(signum)
        assert stopped.value.code == 128 + signum
        assert callback._signal == signum
    finally:
        callback._restore_signals()
    assert signal.getsignal(signum) is before
