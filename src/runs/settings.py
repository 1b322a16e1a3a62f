"""Settings that cannot work, alone or together, refused before any data or model loads, each
with the config key to change. Every setting is checked here and nowhere else."""

from __future__ import annotations

import logging
import math
from pathlib import Path
from typing import Any

from omegaconf import DictConfig

from src.grpo.objective import LOSS_TYPES, SCALES
from src.model.causal_lm import DTYPES
from src.utils.config import plain
from src.utils.errors import ConfigError, MissingFileError
from src.utils.folders import check_writable

log = logging.getLogger(__name__)
HIGH_KL = 0.5  # above this the KL term tends to hold the policy at its reference


def check_settings(cfg: DictConfig) -> None:
    """Raise `ConfigError` for the first setting that cannot work."""
    check_algo_settings(**(plain(cfg.get("algo")) or {}))
    check_model_settings(plain(cfg.get("model")) or {})
    check_role_settings(cfg)
    check_trainer_settings(cfg)
    check_output_folders(cfg)


def check_algo_settings(
    *,
    group_size: int,
    kl_beta: float,
    epsilon_low: float,
    epsilon_high: float,
    loss_type: str,
    scale_rewards: str,
    num_iterations: int,
    max_nonfinite_steps: int,
    top_k_ratio: float = 1.0,
    ref_model_path: str | None = None,
    **others: Any,
) -> None:
    """GRPO settings (`algo.*`) that cannot work."""
    if group_size < 2:
        raise ConfigError(
            f"algo.group_size must be >= 2 (advantages are group-relative), got {group_size}"
        )
    if kl_beta < 0:
        raise ConfigError(f"algo.kl_beta must be >= 0, got {kl_beta}")
    if kl_beta > HIGH_KL:
        log.warning(
            "algo.kl_beta=%s is high: above %s the KL term tends to keep the policy where it "
            "started (0.01-0.1 is usual)",
            kl_beta,
            HIGH_KL,
        )
    if not (0 <= epsilon_low < 1 or epsilon_low == math.inf) or epsilon_high < 0:
        raise ConfigError(
            "algo.epsilon_low must be in [0, 1) and algo.epsilon_high >= 0 (the ratio is clipped "
            f"to [1 - epsilon_low, 1 + epsilon_high]; .inf for both turns clipping off), got "
            f"{epsilon_low} and {epsilon_high}"
        )
    if not 0 < top_k_ratio <= 1:
        raise ConfigError(f"algo.top_k_ratio must be in (0, 1], got {top_k_ratio}")
    if ref_model_path is not None:
        if kl_beta == 0:
            raise ConfigError(
                "algo.ref_model_path is set but algo.kl_beta is 0: the reference model is used "
                "only by the KL term; set algo.kl_beta > 0 or drop algo.ref_model_path"
            )
        if not Path(str(ref_model_path)).is_dir():
            raise MissingFileError(
                f"algo.ref_model_path: no saved model folder at {ref_model_path}; point it to a "
                "folder holding a LoRA adapter or a full model (e.g. a run's model/ folder)"
            )
    if loss_type not in LOSS_TYPES:
        raise ConfigError(f"algo.loss_type must be one of {LOSS_TYPES}, got {loss_type!r}")
    if scale_rewards not in SCALES:
        raise ConfigError(f"algo.scale_rewards must be one of {SCALES}, got {scale_rewards!r}")
    if num_iterations < 1:
        raise ConfigError(f"algo.num_iterations must be >= 1, got {num_iterations}")
    if max_nonfinite_steps < 1:
        raise ConfigError(f"algo.max_nonfinite_steps must be >= 1, got {max_nonfinite_steps}")


def check_model_settings(model: dict[str, Any]) -> None:
    """Model settings (`model.*`) that cannot work."""
    if model.get("dtype", "float32") not in DTYPES:
        raise ConfigError(f"model.dtype must be one of {sorted(DTYPES)}, got {model['dtype']!r}")
    if model.get("load_in_4bit") and not (model.get("lora") or model.get("adapter_path")):
        raise ConfigError(
            "model.load_in_4bit=true without LoRA: 4-bit weights cannot be trained; "
            "add the adapter with hardware=[4bit,lora] (or set model.lora)"
        )
    adapter = model.get("adapter_path")
    if (
        adapter
        and str(adapter).startswith(("/", ".", "~"))
        and not Path(adapter).expanduser().is_dir()
    ):
        raise MissingFileError(
            f"model.adapter_path: no adapter folder at {adapter} (preset=from_sft takes it as "
            "sft_adapter=DIR); point it to a saved LoRA adapter, e.g. a run's model/ folder"
        )


RETRIEVAL_ROLES = ("src.policy.rewriter.Rewriter", "src.policy.reader.Reader")


def check_role_settings(cfg: DictConfig) -> None:
    """Roles that need parts the config lacks: a retriever, or a LoRA adapter whose base serves
    as the frozen planner and generator."""
    policy = cfg.get("policy") or {}
    target = policy.get("_target_")
    if target in RETRIEVAL_ROLES and cfg.get("retrieval") is None:
        raise ConfigError(
            f"policy {target.rsplit('.', 1)[-1].lower()} retrieves documents but no retriever is "
            "configured; add retriever=bm25 (or minilm, medcpt)"
        )
    if target != "src.policy.rewriter.Rewriter":
        return
    model = cfg.get("model") or {}
    if not (model.get("lora") or model.get("adapter_path")):
        raise ConfigError(
            "policy=rewriter trains a LoRA adapter whose base model (adapter off) is the frozen "
            "planner and generator, but model.lora is null; add hardware=lora (or set model.lora)"
        )
    if (cfg.get("sft") or {}).get("enabled"):
        raise ConfigError(
            "policy=rewriter has no supervised targets (there are no gold queries); "
            "set sft.enabled=false"
        )


def check_trainer_settings(cfg: DictConfig) -> None:
    """Run-length, evaluation and checkpoint intervals that cannot work."""
    trainer = cfg.get("trainer") or {}
    epochs = cfg.get("epochs")
    if epochs is not None and not float(epochs) > 0:
        raise ConfigError(f"epochs must be > 0 (passes over the training rows), got {epochs}")
    if trainer.get("max_steps", 1) is None:
        if epochs is None:
            raise ConfigError(
                "trainer.max_steps is null and epochs is not set: give the run length as "
                "trainer.max_steps=N or epochs=N"
            )
    elif int(trainer.get("max_steps", 1)) < 1:
        raise ConfigError(f"trainer.max_steps must be >= 1, got {trainer.get('max_steps')}")
    interval = trainer.get("val_check_interval")
    if interval is not None and int(interval) < 1:
        raise ConfigError(f"trainer.val_check_interval must be >= 1, got {interval}")
    every = ((plain(cfg.get("callbacks")) or {}).get("checkpoint") or {}).get("every_n_train_steps")
    iterations = int((cfg.get("algo") or {}).get("num_iterations", 1))
    if every and int(every) % iterations:
        raise ConfigError(
            f"callbacks.checkpoint.every_n_train_steps={every} is not a multiple of "
            f"algo.num_iterations={iterations}: a rollout's updates end on multiples of "
            f"{iterations}, so checkpoints would come only every {math.lcm(int(every), iterations)} steps"
        )


def check_output_folders(cfg: DictConfig) -> None:
    """Folders a run writes only at its end (the saved model) or on the way (the warm-start
    cache) must be writable now, not after hours of training."""
    sft = cfg.get("sft") or {}
    folders = {
        "save_model": cfg.get("save_model"),
        "sft.cache_dir": sft.get("cache_dir") if sft.get("enabled") else None,
    }
    for key, folder in folders.items():
        if folder:
            check_writable(Path(str(folder)), key)
