"""Run the supervised warm start once and cache the resulting model folder under outputs/.

The cache key hashes everything that shapes the result (model, data, role, SFT settings,
seed), so a second run with the same settings skips straight to GRPO. A LoRA model caches
only its adapter, which GRPO then keeps training (`model.adapter_path`).
"""

from __future__ import annotations

import json
import logging
import shutil
from pathlib import Path
from typing import Any

import lightning as L
from omegaconf import DictConfig, OmegaConf

from src.data.datamodule import PromptDataModule, held_out_loader, step_loader
from src.policy.role import Role
from src.reward.combine import CombinedReward
from src.rollout.sampler import Sampler
from src.sft.module import SFTModule
from src.sft.sft_settings import SftSettings
from src.tracking.run_logger import mlflow_loggers
from src.utils.config import build, settings_hash
from src.utils.folders import published_folder
from src.utils.progress import StepProgressBar

log = logging.getLogger(__name__)
DONE = "warm_start.json"


def cache_key(cfg: DictConfig) -> str:
    """Hash of the settings that determine the warm-started weights."""
    shaping = {
        name: OmegaConf.to_container(cfg[name], resolve=True)
        for name in ("model", "data", "policy", "sft")
    }
    shaping["data"].pop("num_batches")  # the GRPO run length does not change the warm start
    shaping["data"].pop("rounds_per_step", None)  # nor GRPO's dynamic sampling
    shaping["sft"].pop("cache_dir")
    shaping["model"].pop("compile", None)  # speed only: compiled or not, the same warm start
    shaping["seed"] = cfg.seed
    return settings_hash(shaping)


def warm_start(
    cfg: DictConfig,
    sft: SftSettings,
    datamodule: PromptDataModule,
    policy: Role,
    reward: CombinedReward,
    sampler: Sampler,
    loggers: list[Any],
) -> Path:
    """Return the folder of the warm-started model, training it first if it is not cached;
    `sft` holds the settings of `cfg.sft`, built once with the run's parts."""
    folder = Path(sft.cache_dir) / f"{cfg.task_name}-{cache_key(cfg)}"
    for logger in mlflow_loggers(loggers):
        logger.experiment.set_tag(logger.run_id, "warm_start", str(folder))
    if (folder / DONE).exists():
        log.info("SFT warm start: reusing %s", folder)
        return folder
    datamodule.prepare_rows()
    check_rows = datamodule.train_rows[: sft.check_size]
    train_rows = datamodule.train_rows[sft.check_size :]
    lm = build(cfg.model)
    policy.prepare(lm, datamodule.train_rows + datamodule.val_rows)
    module = SFTModule(lm, policy, reward, sampler, build(sft.optimizer), sft.stop_at_reward)
    trainer = L.Trainer(
        **placement(cfg.trainer),
        max_steps=sft.max_steps,
        max_epochs=-1,
        val_check_interval=min(sft.check_every_n_steps, sft.max_steps),
        check_val_every_n_epoch=None,
        num_sanity_val_steps=0,
        logger=loggers,
        log_every_n_steps=10,
        enable_checkpointing=False,
        callbacks=[StepProgressBar(label="SFT")],
        enable_model_summary=False,
    )
    train_loader = step_loader(train_rows, sft.batch_size, sft.max_steps, cfg.seed)
    check_loader = held_out_loader(check_rows, datamodule.settings.eval_batch_size)
    log.info("SFT warm start: up to %d steps on %d rows", sft.max_steps, len(train_rows))
    trainer.fit(module, train_loader, check_loader)
    summary = {"steps": trainer.global_step, "eval_reward": module.last_eval_reward}
    if trainer.is_global_zero:  # one process writes; the others wait for it below
        if not (folder / DONE).exists():  # an interrupted attempt of an older version
            shutil.rmtree(folder, ignore_errors=True)
        with published_folder(folder) as partial:
            lm.save(partial, merge=False)
            (partial / DONE).write_text(json.dumps(summary, indent=2))
        log.info("SFT warm start: %s -> %s", summary, folder)
    trainer.strategy.barrier("warm_start_saved")
    return folder


def placement(trainer: DictConfig) -> dict[str, Any]:
    """The GRPO trainer's devices, nodes, strategy and precision, so the warm start runs
    where and how GRPO will (a strategy given as a config is built afresh for this trainer)."""
    keys = ("accelerator", "devices", "num_nodes", "strategy", "precision")
    chosen = {key: trainer[key] for key in keys if trainer.get(key) is not None}
    if "strategy" in chosen and not isinstance(chosen["strategy"], str):
        chosen["strategy"] = build(chosen["strategy"])
    return {**chosen, "use_distributed_sampler": False}
