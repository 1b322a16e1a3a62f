"""SIGTERM during GRPO: the step finishes, last.ckpt is written, the run is KILLED, exit 143."""

from __future__ import annotations

import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import mlflow
import pytest
import torch

from src.utils.resolvers import PROJECT_ROOT


def logged_steps(database) -> int:
    """How many `loss` values the run has logged so far (0 before the store exists)."""
    if not database.exists():
        return 0
    try:
        with sqlite3.connect(database, timeout=5) as connection:
            (count,) = connection.execute(
                "select count(*) from metrics where key = 'loss'"
            ).fetchone()
    except sqlite3.OperationalError:  # tables not created yet
        return 0
    return count


RUN = [
    sys.executable, "-m", "src.train",
    "model=tiny", "sft.enabled=false", "data.batch_size=2", "data.val_size=8",
    "algo.group_size=4", "algo.max_completion_length=4",
    "callbacks.checkpoint.every_n_train_steps=1000",
]  # fmt: skip


@pytest.mark.slow
def test_sigterm_writes_a_checkpoint_and_marks_the_run_killed(tmp_path):
    process = subprocess.Popen(
        [
            *RUN,
            "trainer.max_steps=500",
            f"paths.output_root={tmp_path}",
            f"paths.run_dir={tmp_path / 'run'}",
        ],
        cwd=PROJECT_ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        text=True,
    )
    deadline = time.monotonic() + 180
    while logged_steps(tmp_path / "mlflow.db") < 3:  # wait until GRPO is under way
        assert process.poll() is None, process.stdout.read()[-3000:]
        assert time.monotonic() < deadline, "training did not start"
        time.sleep(0.2)
    process.send_signal(signal.SIGTERM)
    output, _ = process.communicate(timeout=120)

    assert process.returncode == 128 + signal.SIGTERM, output[-3000:]
    client = mlflow.MlflowClient(tracking_uri=f"sqlite:///{tmp_path}/mlflow.db")
    (run,) = client.search_runs([client.get_experiment_by_name("arithmetic").experiment_id])
    assert run.info.status == "KILLED"
    assert run.data.tags["error"].startswith("Preempted: SIGTERM received: stopped after step")
    last_step = max(m.step for m in client.get_metric_history(run.info.run_id, "loss"))
    assert 3 <= last_step < 500
    checkpoint = torch.load(tmp_path / "run" / "checkpoints" / "last.ckpt", weights_only=False)
    assert checkpoint["global_step"] == last_step  # the checkpoint holds every logged step
    assert f"continue with ckpt_path={tmp_path / 'run' / 'checkpoints' / 'last.ckpt'}" in output

    # The checkpoint continues the same MLflow run: the next steps follow the last one written.
    resumed = subprocess.run(
        [
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
