"""Callback writing the module's latest sample completions to MLflow as a table artifact."""

from __future__ import annotations

from typing import Any

import lightning as L

from src.tracking.run_logger import mlflow_loggers


class SamplesTable(L.Callback):
    """After a step that collected samples, log them as `samples/step_XXXXXX.json` (MLflow table)."""

    def on_train_batch_end(
        self, trainer: L.Trainer, module: Any, outputs: Any, batch: Any, batch_idx: int
    ) -> None:
        samples = getattr(module, "last_samples", None)
        if not samples:
            return
        module.last_samples = []
        columns = {key: [row[key] for row in samples] for key in samples[0]}
        for logger in mlflow_loggers(trainer.loggers):
            logger.experiment.log_table(
                logger.run_id,
                data=columns,
                artifact_file=f"samples/step_{trainer.global_step:06d}.json",
            )
