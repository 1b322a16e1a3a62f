"""An unreachable tracking server: the run records to the fallback file, says how to copy it
over, and the copy gives the run everything it missed; request errors still raise."""

from __future__ import annotations

import logging
from pathlib import Path

import mlflow
import pytest
from mlflow.exceptions import MlflowException, RestException

from src.tracking.fallback import CALLS, COPIED, main, unreachable
from src.tracking.run_logger import MLflowRunLogger


class Switchable:
    """A real client that fails like an unreachable HTTP server while `down` is set."""

    def __init__(self, client: mlflow.MlflowClient) -> None:
        self.client = client
        self.down = False

    def __getattr__(self, name):
        method = getattr(self.client, name)
        if not callable(method):
            return method

        def call(*args, **kwargs):
            if self.down:
                raise MlflowException(
                    "API request to http://127.0.0.1:1/api/2.0/mlflow/runs/log-batch failed "
                    "with exception HTTPConnectionPool: Max retries exceeded (Connection refused)"
                )
            return method(*args, **kwargs)

        return call


def logger_with_server(tmp_path: Path, **kwargs) -> tuple[MLflowRunLogger, Switchable]:
    logger = MLflowRunLogger(
        experiment_name="e",
        tracking_uri=f"sqlite:///{tmp_path}/mlflow.db",
        fallback_dir=str(tmp_path / "run" / "mlflow_fallback"),
        **kwargs,
    )
    server = Switchable(logger._mlflow_client.client)
    logger._mlflow_client.client = server
    return logger, server


def history(client: mlflow.MlflowClient, run_id: str, key: str) -> list[tuple[int, float]]:
    """(step, value) pairs of a metric in step order, duplicates kept."""
    return sorted((m.step, m.value) for m in client.get_metric_history(run_id, key))


def test_metrics_wait_in_the_fallback_file_until_copied_over(tmp_path, caplog):
    logger, server = logger_with_server(tmp_path)
    logger.log_hyperparams({"lr": 0.1})
    logger.log_metrics({"loss": 0.5}, step=1)
    run_id = logger.run_id
    server.down = True
    with caplog.at_level(logging.WARNING):
        for step, value in ((2, 0.25), (3, -1.5)):
            logger.log_metrics({"loss": value, "reward": step / 10}, step=step)  # training goes on
        logger.experiment.set_tag(run_id, "note", "offline")
        logger.experiment.log_table(run_id, data={"a": [1, 2]}, artifact_file="samples/t.json")
        table = tmp_path / "report.txt"
        table.write_text("made while offline")
        logger.experiment.log_artifact(run_id, str(table))
        table.unlink()  # a temporary file: the fallback keeps its own copy
        logger.end_run()
    assert "unreachable" in caplog.text
    assert f"python -m src.tracking.fallback {tmp_path / 'run' / 'mlflow_fallback'}" in caplog.text

    client = mlflow.MlflowClient(f"sqlite:///{tmp_path}/mlflow.db")
    assert [(m.step, m.value) for m in client.get_metric_history(run_id, "loss")] == [(1, 0.5)]
    assert client.get_run(run_id).info.status == "RUNNING"

    main([str(tmp_path / "run")])  # the documented command, given the run folder
    run = client.get_run(run_id)
    assert history(client, run_id, "loss") == [(1, 0.5), (2, 0.25), (3, -1.5)]
    assert history(client, run_id, "reward") == [(2, 0.2), (3, 0.3)]
    assert run.info.status == "FINISHED"
    assert run.data.tags["note"] == "offline"
    artifacts = {a.path for a in client.list_artifacts(run_id)} | {
        a.path for a in client.list_artifacts(run_id, "samples")
    }
    assert {"report.txt", "samples/t.json"} <= artifacts
    folder = tmp_path / "run" / "mlflow_fallback"
    assert not (folder / CALLS).exists() and (folder / COPIED).exists()

    main([str(folder / COPIED)])  # copying again writes nothing twice
    assert history(client, run_id, "loss") == [(1, 0.5), (2, 0.25), (3, -1.5)]
    assert (folder / COPIED).exists()


def test_the_server_is_tried_again_and_the_fallback_copied_by_itself(tmp_path):
    logger, server = logger_with_server(tmp_path, retry_after_s=0)
    logger.log_metrics({"loss": 1.5}, step=1)
    server.down = True
    logger.log_metrics({"loss": 2.5}, step=2)
    server.down = False
    logger.log_metrics({"loss": 3.5}, step=3)  # the retry copies step 2 over first
    client = mlflow.MlflowClient(f"sqlite:///{tmp_path}/mlflow.db")
    assert history(client, logger.run_id, "loss") == [(1, 1.5), (2, 2.5), (3, 3.5)]
    assert logger._mlflow_client.offline_since is None


def test_a_wrong_request_is_not_taken_for_an_unreachable_server(tmp_path):
    logger, _ = logger_with_server(tmp_path)
    logger.log_hyperparams({"lr": 0.1})
    with pytest.raises(MlflowException, match="Changing param values is not allowed"):
        logger.log_hyperparams({"lr": 0.2})
    assert not unreachable(RestException({"error_code": "INVALID_PARAMETER_VALUE", "message": "x"}))
    assert unreachable(RestException({"error_code": "INTERNAL_ERROR", "message": "x"}))


def test_the_copy_command_names_a_folder_without_fallback(tmp_path):
    with pytest.raises(FileNotFoundError, match="no MLflow fallback file"):
        main([str(tmp_path)])


def test_a_call_cut_short_is_skipped_and_the_next_ones_kept(tmp_path, caplog):
    logger, server = logger_with_server(tmp_path)
    logger.log_metrics({"loss": 0.5}, step=1)
    run_id = logger.run_id
    server.down = True
    logger.log_metrics({"loss": 0.25}, step=2)
    calls = tmp_path / "run" / "mlflow_fallback" / CALLS
    whole = calls.read_text()
    calls.write_text(whole + whole[: len(whole) // 2])  # a run stopped while writing a line
    logger.log_metrics({"loss": -1.5}, step=3)  # written after the broken line, on its own
    logger.end_run()
    with caplog.at_level(logging.WARNING):
        main([str(tmp_path / "run")])
    assert f"{CALLS}:2: not a whole recorded call" in caplog.text
    client = mlflow.MlflowClient(f"sqlite:///{tmp_path}/mlflow.db")
    assert history(client, run_id, "loss") == [(1, 0.5), (2, 0.25), (3, -1.5)]
