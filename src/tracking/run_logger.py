"""An MLflow logger whose run stays RUNNING across the several trainers of one experiment."""

from __future__ import annotations

import logging
import os
import traceback
from collections.abc import Iterable, Mapping
from typing import Any

from lightning.pytorch.loggers import MLFlowLogger
from lightning.pytorch.utilities import rank_zero_only

from src.tracking.fallback import FallbackClient
from src.tracking.store import ensure_store
from src.utils.errors import unwrapped

log = logging.getLogger(__name__)


def mlflow_loggers(loggers: Iterable[Any]) -> list[MLFlowLogger]:
    """The MLflow loggers among a trainer's loggers: the ones that take tags and artifacts."""
    return [logger for logger in loggers if isinstance(logger, MLFlowLogger)]


class MLflowRunLogger(MLFlowLogger):
    """Lightning ends the MLflow run after every `fit` and `validate`; one experiment calls
    several of them (warm start, evaluation, GRPO), so only a failure ends the run early and
    `end_run` closes it when the experiment is done.

    Given the `run_id` of an existing run, `reopen` continues that run after a stop: steps
    the run already holds for a metric are not written again, and params keep their first
    values (changed ones are listed in `resumes/<n>_params.json`)."""

    def __init__(
        self,
        *args: Any,
        fallback_dir: str | None = None,
        retry_after_s: float = 300.0,
        http_retries: int = 2,
        http_timeout_s: int = 30,
        **kwargs: Any,
    ) -> None:
        ensure_store(  # runs started together on a new SQLite store, or of a new experiment
            kwargs.get("tracking_uri"),
            kwargs.get("experiment_name"),
            kwargs.get("artifact_location"),
        )
        super().__init__(*args, **kwargs)
        if str(self._tracking_uri).startswith("http"):
            # MLflow's own defaults retry one request for minutes; the fallback takes over sooner.
            os.environ.setdefault("MLFLOW_HTTP_REQUEST_MAX_RETRIES", str(http_retries))
            os.environ.setdefault("MLFLOW_HTTP_REQUEST_TIMEOUT", str(http_timeout_s))
        if fallback_dir is not None:
            self._mlflow_client = FallbackClient(self._mlflow_client, fallback_dir, retry_after_s)
        self.resumes = 0  # how many times this run was continued, this one included
        self.recorded_steps: dict[str, int] = {}  # metric -> last step written before
        self.first_params: dict[str, str] = {}  # params written before, when reopened
        self.changed_params: dict[str, dict[str, str]] = {}  # this continuation's changes

    @rank_zero_only
    def reopen(self, step: int, checkpoint: str) -> None:
        """Mark the run RUNNING again and note what it already holds, before continuing
        from the checkpoint of optimizer step `step` (on the first process only: the others
        log nothing)."""
        client = self.experiment
        run = client.get_run(self.run_id)
        self.first_params = dict(run.data.params)
        self.recorded_steps = {
            key: max(metric.step for metric in client.get_metric_history(self.run_id, key))
            for key in run.data.metrics
        }
        self.resumes = int(run.data.tags.get("resumes", 0)) + 1
        client.update_run(self.run_id, status="RUNNING")
        if "error" in run.data.tags:  # the stop is history now; error.txt keeps its traceback
            client.delete_tag(self.run_id, "error")
        client.set_tag(self.run_id, "resumes", str(self.resumes))
        client.set_tag(self.run_id, "resumed_from_step", str(step))
        client.log_dict(
            self.run_id,
            {"step": step, "checkpoint": checkpoint, "stopped_with": run.data.tags.get("error")},
            f"resumes/{self.resumes}.json",
        )
        replayed = max(self.recorded_steps.values(), default=0)
        if replayed > step:
            log.info(
                "MLflow run %s already holds steps %d-%d; they are recomputed but keep their "
                "first values",
                self.run_id,
                step + 1,
                replayed,
            )

    def log_hyperparams(self, params: Any) -> None:
        if not self.first_params:
            return super().log_hyperparams(params)
        new = {key: value for key, value in params.items() if key not in self.first_params}
        changed = {
            key: {"before": self.first_params[key], "now": str(value)[:250]}
            for key, value in params.items()
            if key in self.first_params and self.first_params[key] != str(value)[:250]
        }
        if new:
            super().log_hyperparams(new)
        if changed:
            # Several calls (config, data report) may each change some; the file lists them all.
            self.changed_params.update(changed)
            log.info("Continued with changed settings (kept as first logged): %s", sorted(changed))
            self.experiment.log_dict(
                self.run_id,
                {"changed_params": self.changed_params},
                f"resumes/{self.resumes}_params.json",
            )
        return None

    def log_metrics(self, metrics: Mapping[str, float], step: int | None = None) -> None:
        if self.recorded_steps:
            metrics = {
                key: value
                for key, value in metrics.items()
                if (step or 0) > self.recorded_steps.get(key, -1)
            }
            if not metrics:
                return
        super().log_metrics(metrics, step)

    def finalize(self, status: str = "success") -> None:
        if status != "success":
            self.terminate(status)

    def end_run(self) -> None:
        """Mark the run FINISHED."""
        self.terminate("FINISHED")

    def terminate(self, status: str) -> None:
        """End the run with `status` (Lightning's names or MLflow's); with the server gone,
        the status waits in the fallback file with the rest."""
        if not self._initialized:
            return
        status = {"success": "FINISHED", "failed": "FAILED", "finished": "FINISHED"}.get(
            status, status
        )
        if self._checkpoint_callback:
            self._scan_and_log_checkpoints(self._checkpoint_callback)
        self.experiment.set_terminated(self.run_id, status)
        if isinstance(self._mlflow_client, FallbackClient):
            self._mlflow_client.close()


def record_error(client: Any, run_id: str, error: BaseException) -> None:
    """Attach a failure to a run: tag `error` ("Type: message" of the error itself, not of the
    wrapper `instantiate` puts around it; short enough for the UI's run table) and the full
    traceback as the artifact `error.txt`."""
    cause = unwrapped(error)
    summary = f"{type(cause).__name__}: {cause}"
    client.set_tag(run_id, "error", summary[:4000])
    client.log_text(run_id, "".join(traceback.format_exception(error)), "error.txt")
