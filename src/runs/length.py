"""How long a run trains: `trainer.max_steps` as set, or a length given in passes over the data
(`epochs=N`) turned into optimizer steps once the training rows are known. The length is the
run's own object (`RunLength`), handed to the trainer, the schedule and the data module; the
config keeps what the user gave."""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass
from typing import Any

import torch
from omegaconf import DictConfig, OmegaConf

from src.data.datamodule import PromptDataModule
from src.grpo.settings import AlgoSettings
from src.utils.config import build
from src.utils.errors import ConfigError

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class RunLength:
    """The run's length in optimizer steps, in rollouts (training batches, each
    `algo.num_iterations` updates) and its held-out evaluation interval in rollouts, the unit
    Lightning counts `val_check_interval` in."""

    max_steps: int
    rollouts: int
    evaluate_every: int

    def trainer_settings(self) -> dict[str, int]:
        """What the Lightning Trainer takes of the length, beside `cfg.trainer`."""
        return {"max_steps": self.max_steps, "val_check_interval": self.evaluate_every}

    def recorded(self, cfg: DictConfig) -> dict[str, int]:
        """The keys the length fills where the config leaves them null (under `epochs=N`),
        for the run's record."""
        filled = {
            "trainer.max_steps": self.max_steps,
            "data.num_batches": self.rollouts,
            "algo.scheduler.num_training_steps": self.max_steps,
        }
        return {
            key: value
            for key, value in filled.items()
            if OmegaConf.select(cfg, key, default=0, throw_on_missing=False) is None
        }

    def schedule(self, algo: DictConfig) -> Any:
        """`algo.scheduler` built (None: a constant learning rate), its horizon the run's
        steps where its config leaves it null (as `${trainer.max_steps}` is under `epochs=N`),
        and tried once on a stand-in optimizer, so that a schedule it cannot make (a name
        transformers lacks) is refused now, not when training starts."""
        scheduler = algo.get("scheduler")
        if scheduler is None:
            return None
        if "num_training_steps" in scheduler and scheduler.num_training_steps is None:
            factory = build(scheduler, num_training_steps=self.max_steps)
        else:
            factory = build(scheduler)
        stand_in = torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=1.0)
        try:
            factory(optimizer=stand_in)
        except (ValueError, TypeError, KeyError) as error:
            raise ConfigError(f"algo.scheduler cannot be made: {error}") from None
        return factory


def run_length(cfg: DictConfig, datamodule: PromptDataModule, algo: AlgoSettings) -> RunLength:
    """`trainer.max_steps` as set, or, when it is null, ceil(epochs x training rows /
    data.batch_size) rollouts of `algo.num_iterations` updates each; the data module draws
    that many batches. Evaluation every `trainer.val_check_interval` optimizer steps, at most
    the run (null: the whole run, so at step 0 and at the end only)."""
    epochs = cfg.get("epochs")
    trainer = cfg.trainer
    steps = trainer.max_steps
    if steps is not None:
        if epochs:
            log.info("trainer.max_steps=%s is set: epochs=%s is not used", steps, epochs)
        steps = int(steps)
    else:
        rollouts = math.ceil(
            float(epochs) * len(datamodule.train_rows) / datamodule.settings.batch_size
        )
        steps = rollouts * algo.num_iterations
        datamodule.num_batches = rollouts
        log.info(
            "Run length: %s epochs of %d training rows in batches of %d = %d steps",
            epochs,
            len(datamodule.train_rows),
            datamodule.settings.batch_size,
            steps,
        )
    every = trainer.val_check_interval
    every = steps if every is None else min(int(every), steps)
    return RunLength(
        max_steps=steps,
        rollouts=math.ceil(steps / algo.num_iterations),
        evaluate_every=max(1, math.ceil(every / algo.num_iterations)),
    )
