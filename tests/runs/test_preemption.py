"""SIGTERM during GRPO: the step finishes, last.ckpt is written, the run is KILLED, exit 143."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import mlflow
import pytest
import torch

from src.utils.resolvers import PROJECT_ROOT
from tests.signal_at_step import signal_at
from tests.training_process import TINY_RUN, start_training

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
