"""A run length given in passes over the data (`epochs=N`) turned into optimizer steps, once the
training rows are known."""

from __future__ import annotations

import logging
import math

from omegaconf import DictConfig, open_dict

from src.data.datamodule import PromptDataModule
from src.grpo.settings import AlgoSettings

log = logging.getLogger(__name__)


def evaluation_interval(cfg: DictConfig, algo: AlgoSettings) -> int:
    """`trainer.val_check_interval` (optimizer steps) in the unit Lightning counts it in:
    training batches, each one rollout of `algo.num_iterations` optimizer steps. Null: the
    whole run, so held-out evaluation runs at step 0 and at the end only."""
    steps = cfg.trainer.val_check_interval
    if steps is None:
        steps = cfg.trainer.max_steps
    return max(1, math.ceil(int(steps) / algo.num_iterations))


def settle_max_steps(cfg: DictConfig, datamodule: PromptDataModule, algo: AlgoSettings) -> int:
    """`trainer.max_steps` as set, or, when it is null, ceil(epochs x training rows /
    data.batch_size) rollouts of `algo.num_iterations` updates each; written into the config
    (which the scheduler horizon and evaluation interval follow) and the data module."""
    epochs = cfg.get("epochs")
    steps = cfg.trainer.max_steps
    if steps is not None:
        if epochs:
            log.info("trainer.max_steps=%s is set: epochs=%s is not used", steps, epochs)
        return int(steps)
    rollouts = math.ceil(
        float(epochs) * len(datamodule.train_rows) / datamodule.settings.batch_size
    )
    steps = rollouts * algo.num_iterations
    with open_dict(cfg):
        cfg.trainer.max_steps = steps
    datamodule.num_batches = rollouts
    log.info(
        "Run length: %s epochs of %d training rows in batches of %d = %d steps",
        epochs,
        len(datamodule.train_rows),
        datamodule.settings.batch_size,
        steps,
    )
    return steps
