"""SIGTERM or Ctrl-C during GRPO: the step finishes, last.ckpt is written, the run is KILLED,
exit 128 + signal; a second Ctrl-C stops at once, writing nothing."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import mlflow
import pytest
import torch

from src.utils.resolvers import PROJECT_ROOT
from tests.helpers.signal_at_step import signal_at
from tests.helpers.training_process import TINY_RUN, start_training

RUN = [*TINY_RUN, "callbacks.checkpoint.every_n_train_steps=1000"]
STOPPED_AT = 3


@pytest.mark.slow
def test_sigterm_writes_a_checkpoint_and_marks_the_run_killed(tmp_path):
    process = start_training(
        *RUN, "trainer.max_steps=500", f"paths.output_root={tmp_path}",
        f"paths.run_dir={tmp_path / 'run'}",
        *signal_at(STOPPED_AT, "SIGTERM", moment="start"),  # as step 3 begins, before its rollout
    )  # fmt: skip
    output, _ = process.communicate(timeout=300)

    assert process.returncode == 128 + signal.SIGTERM, output[-3000:]
    client = mlflow.MlflowClient(tracking_uri=f"sqlite:///{tmp_path}/mlflow.db")
    (run,) = client.search_runs([client.get_experiment_by_name("arithmetic").experiment_id])
    assert run.info.status == "KILLED"
    assert run.data.tags["error"].startswith("Preempted: SIGTERM received: stopped after step")
    last_step = max(m.step for m in client.get_metric_history(run.info.run_id, "loss"))
    assert last_step == STOPPED_AT  # the step under way when the signal came was finished
    checkpoint = torch.load(tmp_path / "run" / "checkpoints" / "last.ckpt", weights_only=False)
    assert checkpoint["global_step"] == last_step  # the checkpoint holds every logged step
    assert f"continue with ckpt_path={tmp_path / 'run' / 'checkpoints' / 'last.ckpt'}" in output

    # The checkpoint continues the same MLflow run: the next steps follow the last one written.
    resumed = subprocess.run(
        [
            sys.executable,
            "-m",
            "src.train",
            *RUN,
            f"trainer.max_steps={last_step + 2}",
            f"ckpt_path={tmp_path / 'run' / 'checkpoints' / 'last.ckpt'}",
            f"paths.output_root={tmp_path}",
            f"paths.run_dir={tmp_path / 'resumed'}",
        ],
        cwd=PROJECT_ROOT,
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        timeout=300,
    )
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    (continued,) = client.search_runs([run.info.experiment_id])
    assert continued.info.run_id == run.info.run_id
    assert continued.info.status == "FINISHED"
    assert "error" not in continued.data.tags  # the stop is recorded in resumes/1.json instead
    steps = [m.step for m in client.get_metric_history(run.info.run_id, "loss")]
    assert steps == list(range(1, last_step + 3))
    note = client.download_artifacts(run.info.run_id, "resumes/1.json", str(tmp_path))
    assert "SIGTERM received" in Path(note).read_text()


def stopped_run(
    tmp_path: Path, *overrides: str
) -> tuple[subprocess.Popen, str, mlflow.entities.Run]:
    """Train under tmp_path until a signal stops the process: the process, its output (a
    pipe) and its one MLflow run."""
    process = start_training(
        *RUN, "trainer.max_steps=500", f"paths.output_root={tmp_path}",
        f"paths.run_dir={tmp_path / 'run'}", *overrides,
    )  # fmt: skip
    output, _ = process.communicate(timeout=300)
    client = mlflow.MlflowClient(tracking_uri=f"sqlite:///{tmp_path}/mlflow.db")
    (run,) = client.search_runs([client.get_experiment_by_name("arithmetic").experiment_id])
    return process, output, run


def logged_steps(tmp_path: Path, run: mlflow.entities.Run) -> list[int]:
    client = mlflow.MlflowClient(tracking_uri=f"sqlite:///{tmp_path}/mlflow.db")
    return sorted(m.step for m in client.get_metric_history(run.info.run_id, "loss"))


@pytest.mark.slow
def test_ctrl_c_writes_a_checkpoint_and_marks_the_run_killed(tmp_path):
    process, output, run = stopped_run(tmp_path, *signal_at(STOPPED_AT, "SIGINT", "start"))

    assert process.returncode == 128 + signal.SIGINT, output[-3000:]
    assert run.info.status == "KILLED"
    assert run.data.tags["error"].startswith("Preempted: SIGINT received: stopped after step 3")
    assert logged_steps(tmp_path, run) == [1, 2, 3]  # step 3 was finished
    path = tmp_path / "run" / "checkpoints" / "last.ckpt"
    assert torch.load(path, weights_only=False)["global_step"] == STOPPED_AT
    assert f"continue with ckpt_path={path}" in output
    # The log lines reached the pipe without terminal colour codes.
    assert "[src.runs.preemption][WARNING] - Received SIGINT: finishing this step" in output
    assert "\x1b[" not in output


@pytest.mark.slow
def test_a_second_ctrl_c_stops_at_once_keeping_the_periodic_checkpoint(tmp_path):
    process, output, run = stopped_run(
        tmp_path,
        "callbacks.checkpoint.every_n_train_steps=2",
        *signal_at(STOPPED_AT, "SIGINT", "start", times=2),  # before step 3's rollout
    )

    assert process.returncode == 128 + signal.SIGINT, output[-3000:]
    assert run.info.status == "KILLED"
    path = tmp_path / "run" / "checkpoints" / "last.ckpt"
    assert run.data.tags["error"] == (
        "Interrupted: SIGINT received while stopping: stopped at once during step 3; no new "
        f"checkpoint was written; the newest checkpoint is {path}; continue with ckpt_path={path}"
    )
    assert logged_steps(tmp_path, run) == [1, 2]  # step 3 was not finished
    assert torch.load(path, weights_only=False)["global_step"] == 2  # the periodic one, untouched
