"""A rich progress bar that counts optimizer steps instead of epochs."""

from __future__ import annotations

from typing import Any

import lightning as L
from lightning.pytorch.callbacks import RichProgressBar


class StepProgressBar(RichProgressBar):
    """Labels the bar with what it trains (GRPO, SFT) and hides the run version."""

    def __init__(self, label: str = "train", **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.label = label

    def _get_train_description(self, current_epoch: int) -> str:
        return f"{self.label} step"

    def get_metrics(self, trainer: L.Trainer, pl_module: L.LightningModule) -> dict[str, Any]:
        metrics = super().get_metrics(trainer, pl_module)
        metrics.pop("v_num", None)
        return metrics
