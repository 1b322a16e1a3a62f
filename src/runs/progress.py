"""A rich progress bar that counts optimizer steps instead of epochs."""

from __future__ import annotations

from typing import Any

import lightning as L
from lightning.pytorch.callbacks import RichProgressBar


class StepProgressBar(RichProgressBar):
    """Labels the bar with the module's `progress_label` (GRPO, SFT) and hides the run version."""

    def _get_train_description(self, current_epoch: int) -> str:
        label = getattr(self.trainer.lightning_module, "progress_label", "train")
        return f"{label} step"

    def get_metrics(self, trainer: L.Trainer, pl_module: L.LightningModule) -> dict[str, Any]:
        metrics = super().get_metrics(trainer, pl_module)
        metrics.pop("v_num", None)
        return metrics
