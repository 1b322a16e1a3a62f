"""Masked-LM pretraining of the character generator: the stage before its judge and GRPO.

Every step masks the training windows afresh (new spans, same ratio) and teaches the
original characters of the masked positions with cross-entropy, all positions at once.
Held-out windows keep their fixed masks: `generator/val_loss` and the greedy fill's
`generator/val_char_accuracy` say how well it fills text it never saw.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import lightning as L
import torch
from omegaconf import DictConfig
from torch import Tensor

from src.pretraining.fit import StageLength, fit_stage, warmup_cosine
from src.recipes.char_diffusion.network import CharDiffusionNetwork
from src.recipes.char_diffusion.settings import SETTINGS
from src.recipes.char_diffusion.windows import CharWindowDataModule
from src.rollout.rollout import teacher_forced
from src.utils.config import build
from src.utils.setting import Declared

log = logging.getLogger(__name__)
EARLY = "early"  # subfolder: the generator partly trained, whose fills the judge learns to spot


def masked_lm_loss(network: CharDiffusionNetwork, rows: list[dict[str, Any]]) -> Tensor:
    """Mean cross-entropy of the original characters at the masked positions."""
    targets = teacher_forced(
        network, [row["masked"] for row in rows], [row["answer"] for row in rows]
    )
    logps, _ = network.log_probs(targets)
    mask = targets.completion_mask.to(logps.dtype)
    return -(logps * mask).sum() / mask.sum().clamp(min=1)


@torch.no_grad()
def greedy_char_accuracy(network: CharDiffusionNetwork, rows: list[dict[str, Any]]) -> float:
    """Share of masked positions whose most likely character is the original one."""
    prompts = network.encode_prompts([row["masked"] for row in rows])
    logits, valid = network.masked_logits(prompts["input_ids"])
    ids, mask = network.encode_completions([row["answer"] for row in rows])
    width = min(ids.size(1), logits.size(1))
    right = (
        (logits[:, :width].argmax(-1) == ids[:, :width]) & valid[:, :width] & (mask[:, :width] > 0)
    )
    return float(right.sum() / (valid[:, :width] & (mask[:, :width] > 0)).sum().clamp(min=1))


class MaskedLMModule(L.LightningModule):
    """Masked-LM training of a `CharDiffusionNetwork` with fresh masks every step."""

    def __init__(
        self,
        network: CharDiffusionNetwork,
        remask: Callable[[dict[str, Any], random.Random], dict[str, Any]],
        optimizer: Callable[..., torch.optim.Optimizer],
        max_steps: int,
        warmup_steps: int,
        seed: int,
        snapshot: Callable[[int], None],
    ) -> None:
        super().__init__()
        self.network = network
        self.remask = remask
        self.optimizer_factory = optimizer
        self.max_steps = max_steps
        self.warmup_steps = warmup_steps
        self.seed = seed
        self.snapshot = snapshot
        self.val_losses: list[float] = []
        self.val_accuracies: list[float] = []
        self.last_val_accuracy: float | None = None

    def configure_optimizers(self) -> Any:
        parameters = self.network.trainable_parameters()
        return warmup_cosine(self.optimizer_factory, parameters, self.warmup_steps, self.max_steps)

    def training_step(self, batch: list[dict[str, Any]], batch_idx: int) -> Tensor:
        rng = random.Random(f"{self.seed}:{self.global_step}")
        loss = masked_lm_loss(self.network, [self.remask(row, rng) for row in batch])
        self.log("generator/loss", loss, prog_bar=True)
        return loss

    def on_train_batch_end(self, outputs: Any, batch: Any, batch_idx: int) -> None:
        self.snapshot(self.global_step)

    def validation_step(self, batch: list[dict[str, Any]], batch_idx: int) -> None:
        self.val_losses.append(float(masked_lm_loss(self.network, batch)))
        self.val_accuracies.append(greedy_char_accuracy(self.network, batch))

    def on_validation_epoch_end(self) -> None:
        if self.trainer.sanity_checking or not self.val_losses:
            self.val_losses, self.val_accuracies = [], []
            return
        self.last_val_accuracy = sum(self.val_accuracies) / len(self.val_accuracies)
        self.log("generator/val_loss", sum(self.val_losses) / len(self.val_losses))
        self.log("generator/val_char_accuracy", self.last_val_accuracy, prog_bar=True)
        self.val_losses, self.val_accuracies = [], []


def check_generator_training(settings: dict[str, Any], cfg: DictConfig) -> None:
    """What the generator stage would refuse in `settings` (`stages.generator.train`),
    refused before any stage trains (`stages.generator.settings_check`)."""
    GeneratorTraining.of(settings, "the generator stage")


@dataclass(frozen=True)
class GeneratorTraining(Declared):
    """How the generator is pretrained (`stages.generator.train.*`, each key's comment in
    conf/task/char_diffusion.yaml): `max_steps` batches of `batch_size` windows, `dropout`
    while it learns, `optimizer` warmed up over `warmup_steps`, held-out checks every
    `eval_every_n_steps`, its state after `early_step` steps kept."""

    SECTION = "stages.generator.train"
    TABLE = SETTINGS

    max_steps: int
    batch_size: int
    dropout: float
    optimizer: Callable[..., torch.optim.Optimizer]
    warmup_steps: int
    eval_every_n_steps: int
    early_step: int


def pretrain_generator(
    folder: Path,
    cfg: DictConfig,
    datamodule: CharWindowDataModule,
    loggers: list[Any],
    untrained: bool = False,
    **settings: Any,
) -> dict[str, Any]:
    """The generator stage (`stages.generator.train`, a partial over its settings, which
    become a `GeneratorTraining`): train the generator `cfg.model` describes (fresh weights)
    and save it into `folder`, with its state after `early_step` steps in `folder/early`;
    `untrained` saves it as initialised (a dry run). Returns what the stage did."""
    training = GeneratorTraining.of(settings, "the generator stage")
    max_steps, dropout, early_step = training.max_steps, training.dropout, training.early_step
    network: CharDiffusionNetwork = build(cfg.model, checkpoint=None, dropout=dropout)
    if untrained:
        network.save(folder)
        network.save(folder / EARLY)
        return {"steps": 0, "untrained": True}

    def snapshot(step: int) -> None:
        if step == early_step:
            network.save(folder / EARLY)

    module = MaskedLMModule(
        network,
        datamodule.remasked,
        training.optimizer,
        max_steps,
        training.warmup_steps,
        cfg.seed,
        snapshot,
    )
    log.info("Char generator: masked-LM pretraining, %d steps", max_steps)
    steps = fit_stage(
        module,
        "generator",
        datamodule,
        loggers,
        cfg.trainer.accelerator,
        StageLength(max_steps, training.batch_size, training.eval_every_n_steps, cfg.seed),
    )
    if not (folder / EARLY).exists():  # fewer steps than early_step
        network.save(folder / EARLY)
    network.save(folder)
    return {"steps": steps, "val_char_accuracy": module.last_val_accuracy}
