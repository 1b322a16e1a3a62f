"""Settings that cannot work together, refused before any data or model loads, each with the
config key to change."""

from __future__ import annotations

import math
from typing import Any

from omegaconf import DictConfig, OmegaConf

from src.grpo.module import check_algo_settings
from src.model.causal_lm import DTYPES
from src.utils.errors import ConfigError


def _plain(node: Any) -> dict[str, Any]:
    return OmegaConf.to_container(node, resolve=True) if node is not None else {}


def check_settings(cfg: DictConfig) -> None:
    """Raise `ConfigError` for the first setting that cannot work."""
    try:
        check_algo_settings(**_plain(cfg.get("algo")))
    except ValueError as error:
        raise ConfigError(str(error)) from None
    model = _plain(cfg.get("model"))
    if model.get("dtype", "float32") not in DTYPES:
        raise ConfigError(f"model.dtype must be one of {sorted(DTYPES)}, got {model['dtype']!r}")
    if model.get("load_in_4bit") and not (model.get("lora") or model.get("adapter_path")):
        raise ConfigError(
            "model.load_in_4bit=true without LoRA: 4-bit weights cannot be trained; "
            "add the adapter with hardware=[4bit,lora] (or set model.lora)"
        )
    trainer = cfg.get("trainer") or {}
    if int(trainer.get("max_steps", 1)) < 1:
        raise ConfigError(f"trainer.max_steps must be >= 1, got {trainer.get('max_steps')}")
    interval = trainer.get("val_check_interval")
    if interval is not None and int(interval) < 1:
        raise ConfigError(f"trainer.val_check_interval must be >= 1, got {interval}")
    every = (_plain(cfg.get("callbacks")).get("checkpoint") or {}).get("every_n_train_steps")
    iterations = int((cfg.get("algo") or {}).get("num_iterations", 1))
    if every and int(every) % iterations:
        raise ConfigError(
            f"callbacks.checkpoint.every_n_train_steps={every} is not a multiple of "
            f"algo.num_iterations={iterations}: a rollout's updates end on multiples of "
            f"{iterations}, so checkpoints would come only every {math.lcm(int(every), iterations)} steps"
        )
