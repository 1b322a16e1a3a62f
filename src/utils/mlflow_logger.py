"""An MLflow logger whose run stays RUNNING across the several trainers of one experiment."""

from __future__ import annotations

import traceback
from collections.abc import Iterable
from typing import Any

from lightning.pytorch.loggers import MLFlowLogger


def mlflow_loggers(loggers: Iterable[Any]) -> list[MLFlowLogger]:
    """The MLflow loggers among a trainer's loggers: the ones that take tags and artifacts."""
    return [logger for logger in loggers if isinstance(logger, MLFlowLogger)]


class MLflowRunLogger(MLFlowLogger):
    """Lightning ends the MLflow run after every `fit` and `validate`; one experiment calls
    several of them (warm start, evaluation, GRPO), so only a failure ends the run early and
    `end_run` closes it when the experiment is done."""

    def finalize(self, status: str = "success") -> None:
        if status != "success":
            super().finalize(status)

    def end_run(self) -> None:
        """Mark the run FINISHED."""
        super().finalize("success")


def record_error(client: Any, run_id: str, error: BaseException) -> None:
    """Attach a failure to a run: tag `error` ("Type: message", short enough for the UI's run
    table) and the full traceback as the artifact `error.txt`."""
    summary = f"{type(error).__name__}: {error}"
    client.set_tag(run_id, "error", summary[:4000])
    client.log_text(run_id, "".join(traceback.format_exception(error)), "error.txt")
