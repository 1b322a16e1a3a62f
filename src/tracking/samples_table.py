"""Sample completions with their rewards, written to MLflow as table artifacts."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from src.tracking.run_logger import mlflow_loggers


def log_samples_table(loggers: Iterable[Any], rows: list[dict[str, Any]], step: int) -> None:
    """Log `rows` (one dict per completion, same keys) as `samples/step_XXXXXX.json`, a table
    the MLflow UI shows under the run's artifacts, to every MLflow logger."""
    if not rows:
        return
    keys = list(dict.fromkeys(key for row in rows for key in row))  # rows may differ in keys
    columns = {key: [row.get(key) for row in rows] for key in keys}
    for logger in mlflow_loggers(loggers):
        logger.experiment.log_table(
            logger.run_id, data=columns, artifact_file=f"samples/step_{step:06d}.json"
        )
