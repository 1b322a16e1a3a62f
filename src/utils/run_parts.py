"""What every entry point builds before any model loads: seeded data, role, reward, sampler, loggers."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import lightning as L
from hydra.utils import instantiate
from omegaconf import DictConfig

from src.data.datamodule import PromptDataModule
from src.utils.checks import check_settings


@dataclass
class RunParts:
    """The pieces `train`, `evaluate` and the pipeline stages share."""

    datamodule: PromptDataModule
    policy: Any
    reward: Any
    sampler: Any
    loggers: list[Any]


def build_run_parts(cfg: DictConfig) -> RunParts:
    """Check the settings, seed, load and check the data (bad settings and bad rows fail here,
    before any model loads), then build the role, reward, sampler and loggers."""
    check_settings(cfg)
    L.seed_everything(cfg.seed, workers=True)
    datamodule = instantiate(cfg.data)
    datamodule.prepare_rows()
    return RunParts(
        datamodule=datamodule,
        policy=instantiate(cfg.policy),
        reward=instantiate(cfg.reward),
        sampler=instantiate(cfg.rollout),
        loggers=[instantiate(logger) for logger in cfg.get("logger", {}).values()],
    )
