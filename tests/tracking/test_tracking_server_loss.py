"""The MLflow tracking server dies mid-run: training finishes, the run's records wait in the
fallback file, and the documented command copies them over once the server is back, every
value as an uninterrupted run of the same seed logged it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import mlflow
import pytest

from src.tracking.local_server import free_port
from src.utils.resolvers import PROJECT_ROOT
from tests.helpers.compare import assert_same_histories, assert_updates_were_not_trivial, histories
from tests.helpers.mlflow_server import mlflow_server
from tests.helpers.signal_at_step import signal_at
from tests.helpers.training_process import TINY_RUN, start_training

STEPS = 8
LOST_AFTER = 2
RUN = [
    *TINY_RUN, "algo.samples_every_n_steps=2", f"trainer.max_steps={STEPS}",
    "trainer.val_check_interval=4",
    "algo.loss_type=dapo",  # token-level: the loss is non-zero even without a KL term
]  # fmt: skip


@pytest.mark.slow
def test_training_outlives_the_tracking_server_and_the_records_are_copied_later(tmp_path):
    # The same run into a local store, never interrupted: what the copy must reproduce.
    straight = start_training(
        *RUN, f"paths.output_root={tmp_path / 'straight'}",
        f"paths.run_dir={tmp_path / 'straight' / 'run'}",
    )  # fmt: skip

    store = f"sqlite:///{tmp_path}/server.db"
    port = free_port()
    log = tmp_path / "server.log"
    with mlflow_server(store, tmp_path / "artifacts", log, port) as address:
        process = start_training(
            *RUN, f"paths.mlflow_uri={address}",
            f"paths.output_root={tmp_path}", f"paths.run_dir={tmp_path / 'run'}",
            *signal_at(LOST_AFTER, "SIGSTOP"),  # holds itself while the server goes away
            "logger.mlflow.http_retries=0",  # the fallback at the first refused request
        )  # fmt: skip
        _, status = os.waitpid(process.pid, os.WUNTRACED)
        assert os.WIFSTOPPED(status), process.communicate()[0][-3000:]
    process.send_signal(signal.SIGCONT)
    output, _ = process.communicate(timeout=300)
    assert process.returncode == 0, output[-3000:]
    assert "unreachable" in output
    fallback = tmp_path / "run" / "mlflow_fallback"
    assert f"python -m src.tracking.fallback {fallback}" in output

    straight_output, _ = straight.communicate(timeout=300)
    assert straight.returncode == 0, straight_output[-3000:]
    local = mlflow.MlflowClient(f"sqlite:///{tmp_path / 'straight'}/mlflow.db")
    (reference,) = local.search_runs([local.get_experiment_by_name("arithmetic").experiment_id])
    expected = histories(local, reference)
    assert_updates_were_not_trivial(expected)

    with mlflow_server(store, tmp_path / "artifacts", log, port) as address:
        client = mlflow.MlflowClient(address)
        (run,) = client.search_runs([client.get_experiment_by_name("arithmetic").experiment_id])
        before = histories(client, run, ["loss"])["loss"]
        assert [step for step, _ in before] == list(range(1, LOST_AFTER + 1))
        assert run.info.status == "RUNNING"

        copied = subprocess.run(
            [sys.executable, "-m", "src.tracking.fallback", str(tmp_path / "run")],
            cwd=PROJECT_ROOT,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert copied.returncode == 0, copied.stderr[-3000:]
        run = client.get_run(run.info.run_id)
        assert run.info.status == "FINISHED"
        got = histories(client, run)
        assert [step for step, _ in got["loss"]] == list(range(1, STEPS + 1))
        assert [step for step, _ in got["eval/accuracy"]] == [0, 4, 8]
        assert_same_histories(got, expected)
        print(f"server lost after step {LOST_AFTER}; steps {LOST_AFTER + 1}-{STEPS} copied later")
