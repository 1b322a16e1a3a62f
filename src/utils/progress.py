"""Progress bars: a rich bar that counts optimizer steps instead of epochs, and one for work
done before training."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any, TypeVar

import lightning as L
from lightning.pytorch.callbacks import RichProgressBar
from rich.progress import Progress

T = TypeVar("T")


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


def progress_steps(items: Sequence[T], label: str) -> Iterator[T]:
    """Iterate over `items` behind a transient progress bar named `label` (for work before
    training, e.g. a planner's pass over the questions)."""
    with Progress(transient=True) as progress:
        task = progress.add_task(label, total=len(items))
        for item in items:
            yield item
            progress.advance(task)
