"""The MLflow tracking server dies mid-run: training finishes, the run's records wait in the
fallback file, and the documented command copies them over once the server is back."""

from __future__ import annotations

import signal
import subprocess
import sys

import mlflow
import pytest

from src.utils.resolvers import PROJECT_ROOT
from tests.mlflow_server import free_port, mlflow_server
from tests.training_process import TINY_RUN, start_training, wait_for_steps

STEPS = 8


@pytest.mark.slow
def test_training_outlives_the_tracking_server_and_the_records_are_copied_later(tmp_path):
    store = f"sqlite:///{tmp_path}/server.db"
    port = free_port()
    log = tmp_path / "server.log"
    with mlflow_server(store, tmp_path / "artifacts", log, port) as address:
        process = start_training(
            *TINY_RUN, "algo.samples_every_n_steps=2", f"trainer.max_steps={STEPS}",
            "trainer.val_check_interval=4", f"paths.mlflow_uri={address}",
            f"paths.output_root={tmp_path}", f"paths.run_dir={tmp_path / 'run'}",
        )  # fmt: skip
        wait_for_steps(process, tmp_path / "server.db", 2)
        process.send_signal(signal.SIGSTOP)  # hold training while the server goes away
    process.send_signal(signal.SIGCONT)
    output, _ = process.communicate(timeout=300)
    assert process.returncode == 0, output[-3000:]
    assert "unreachable" in output
    fallback = tmp_path / "run" / "mlflow_fallback"
    assert f"python -m src.utils.mlflow_fallback {fallback}" in output

    with mlflow_server(store, tmp_path / "artifacts", log, port) as address:
        client = mlflow.MlflowClient(address)
        (run,) = client.search_runs([client.get_experiment_by_name("arithmetic").experiment_id])
        before = sorted(m.step for m in client.get_metric_history(run.info.run_id, "loss"))
        assert before == list(range(1, len(before) + 1)) and len(before) < STEPS
        assert run.info.status == "RUNNING"

        copied = subprocess.run(
            [sys.executable, "-m", "src.utils.mlflow_fallback", str(tmp_path / "run")],
            cwd=PROJECT_ROOT,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert copied.returncode == 0, copied.stderr[-3000:]
        run = client.get_run(run.info.run_id)
        steps = sorted(m.step for m in client.get_metric_history(run.info.run_id, "loss"))
        assert steps == list(range(1, STEPS + 1))
        accuracy = client.get_metric_history(run.info.run_id, "eval/accuracy")
        assert sorted(m.step for m in accuracy) == [0, 4, 8]
        assert run.info.status == "FINISHED"
        print(f"server lost after step {before[-1]}; steps {before[-1] + 1}-{STEPS} copied later")
