"""The learning-rate schedule `algo.scheduler` builds: one of transformers' named schedules, its
warm-up given in steps or as a share of the run (TRL's `warmup_ratio`), so that a warm-up stays
a share of the run whatever its length (`epochs=N` makes the length known only once the
training rows are)."""

from __future__ import annotations

import math
from typing import Any

import torch
from transformers import get_scheduler


def learning_rate_schedule(
    optimizer: torch.optim.Optimizer,
    num_training_steps: int,
    name: str = "linear",
    num_warmup_steps: int = 0,
    warmup_ratio: float | None = None,
    scheduler_specific_kwargs: dict[str, Any] | None = None,
) -> torch.optim.lr_scheduler.LRScheduler:
    """transformers' schedule `name` (linear, cosine, constant_with_warmup, ...) over
    `num_training_steps`, warmed up linearly over `num_warmup_steps`, or, when `warmup_ratio`
    is set, over ceil(warmup_ratio x num_training_steps) steps. A warm-up given to `constant`
    (which has none) is refused rather than ignored."""
    if warmup_ratio is not None:
        num_warmup_steps = math.ceil(float(warmup_ratio) * int(num_training_steps))
    if name == "constant" and num_warmup_steps:  # transformers' constant would ignore it
        raise ValueError(
            f"name=constant takes no warm-up, and {num_warmup_steps} warm-up steps are set: use "
            "name=constant_with_warmup, or set num_warmup_steps=0 and warmup_ratio=null"
        )
    return get_scheduler(
        name,
        optimizer,
        num_warmup_steps=num_warmup_steps,
        num_training_steps=int(num_training_steps),
        scheduler_specific_kwargs=scheduler_specific_kwargs,
    )
