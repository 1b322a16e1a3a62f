"""The training loop every stage before GRPO shares: a step-counted Lightning fit on the
training rows, held-out checks every few steps, metrics to the run's loggers."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import lightning as L
import torch
from torch.utils.data import DataLoader

from src.data.datamodule import PromptDataModule, keep_rows, step_loader
from src.utils.progress import StepProgressBar


def warmup_cosine(
    optimizer: Callable[..., torch.optim.Optimizer],
    parameters: Iterable[torch.nn.Parameter],
    warmup_steps: int,
    max_steps: int,
) -> dict[str, Any]:
    """A stage's optimizer over `parameters` with linear warm-up then cosine decay to 0,
    stepped every step: what a `configure_optimizers` returns."""
    # imported here: transformers' optimization module brings in peft and bitsandbytes, which
    # a run without LoRA or 4-bit never needs (over a second of every process's start)
    from transformers import get_cosine_schedule_with_warmup

    built = optimizer(parameters)
    schedule = get_cosine_schedule_with_warmup(built, warmup_steps, max_steps)
    return {"optimizer": built, "lr_scheduler": {"scheduler": schedule, "interval": "step"}}


@dataclass(frozen=True)
class StageLength:
    """How long a stage trains: `max_steps` batches of `batch_size` training rows drawn from
    `seed`, checked on the held-out rows every `eval_every_n_steps`."""

    max_steps: int
    batch_size: int
    eval_every_n_steps: int
    seed: int


def fit_stage(
    module: L.LightningModule,
    label: str,
    datamodule: PromptDataModule,
    loggers: list[Any],
    accelerator: str,
    length: StageLength,
) -> int:
    """Train `module` for `length.max_steps` batches of training rows, checking on the
    held-out rows every `length.eval_every_n_steps`; returns the steps taken."""
    max_steps, eval_every_n_steps = length.max_steps, length.eval_every_n_steps
    trainer = L.Trainer(
        max_steps=max_steps,
        max_epochs=-1,
        val_check_interval=min(eval_every_n_steps, max_steps),
        check_val_every_n_epoch=None,
        num_sanity_val_steps=0,
        logger=loggers,
        log_every_n_steps=min(20, eval_every_n_steps),
        enable_checkpointing=False,
        accelerator=accelerator,
        devices=1,
        callbacks=[StepProgressBar(label=label)],
        enable_model_summary=False,
    )
    train_loader = step_loader(datamodule.train_rows, length.batch_size, max_steps, length.seed)
    val_loader = DataLoader(
        datamodule.val_rows, batch_size=datamodule.settings.eval_batch_size, collate_fn=keep_rows
    )
    trainer.fit(module, train_loader, val_loader)
    return trainer.global_step
