"""Hydra entry point: `python -m src.train [overrides]` runs one GRPO experiment.

compose config -> data -> role, reward, sampler -> (cached) SFT warm start, stages and the
task's `before_grpo` steps (e.g. adversarial rounds) -> model -> the role's preparation (plans,
passages) -> GRPO fit with held-out evaluation before, during and after -> MLflow holds the
record. `dry_run=true` stops after one rollout, before any update.
"""

from __future__ import annotations

import logging
from typing import Any

import hydra
import lightning as L
from omegaconf import DictConfig

from src.model.saved import saved_model_settings
from src.pretraining.stages import run_stages
from src.runs.cli import run_cli
from src.runs.dry_run import dry_run
from src.runs.hooks import before_training
from src.runs.method import log_method
from src.runs.parts import (
    build_run_parts,
    grpo_module,
    load_reference,
    log_figures,
    prepare_roles,
    warm_started,
)
from src.runs.record import log_machine_choices, recorded_run
from src.runs.resume import resume_point, resumed_settings, run_callbacks
from src.tracking.sweep import optimized_value, sweep_job
from src.utils.config import build

log = logging.getLogger(__name__)


def train(cfg: DictConfig, tags: dict[str, str] | None = None) -> dict[str, float]:
    """Run the experiment `cfg` describes and return the final metrics; `tags` go to MLflow."""
    resume = resume_point(cfg)  # ckpt_path: a checkpoint, a run folder or `last`
    parts = build_run_parts(cfg, resume)  # bad data fails here, before any model loads
    datamodule, loggers = parts.datamodule, parts.loggers
    tags = {**(tags or {}), **({"dry_run": "true"} if cfg.get("dry_run") else {})}
    # the steps epochs=N gave and a continuation's checkpoint folder, recorded as what ran
    derived = {**parts.length.recorded(cfg), **resumed_settings(cfg, resume)}
    with recorded_run(loggers, cfg, tags, datamodule.report, derived):
        log_method(loggers, cfg)  # the algo file's method keys, and any value that is not its
        started: dict[str, Any] = {}  # the model settings of the warm start (the config unchanged)
        if parts.sft.enabled and not cfg.get("dry_run"):
            folder = warm_started(cfg, parts, loggers)
            started = saved_model_settings(folder)
        run_stages(cfg, datamodule, loggers)  # models trained before GRPO (a generator, a judge)
        parts = before_training(parts.before_grpo, cfg, parts)  # e.g. adversarial rounds
        lm = build(cfg.model, **started)
        log_figures(loggers, prepare_roles(parts, lm))  # e.g. plans, once and cached
        if cfg.get("dry_run"):
            figures = dry_run(parts, lm)
            log_machine_choices(loggers)  # e.g. oneDNN or MKL products, and why
            return figures
        # algo.ref_model_path, or None: the initial policy is the KL reference
        module = grpo_module(parts, lm, reference=load_reference(cfg, parts.algo))
        callbacks = run_callbacks(cfg, resume)  # continuing: checkpoints beside the one given
        # max_steps and val_check_interval (in rollouts, as Lightning counts) of the run's length
        trainer: L.Trainer = build(
            cfg.trainer, logger=loggers, callbacks=callbacks, **parts.length.trainer_settings()
        )

        # Held-out evaluation at step 0, every val_check_interval steps, and at the last step.
        if resume is None:
            trainer.validate(module, datamodule=datamodule, verbose=False)
        checkpoint = resume.checkpoint if resume else None
        trainer.fit(module, datamodule=datamodule, ckpt_path=checkpoint, weights_only=True)
        if module.evaluated_step != trainer.global_step:
            trainer.validate(module, datamodule=datamodule, verbose=False)
        log_machine_choices(loggers)  # e.g. oneDNN or MKL products, and why
        if cfg.get("save_model") and trainer.is_global_zero:  # one process writes the model
            log.info("Saving the trained policy to %s", lm.save(cfg.save_model, merge=False))
    metrics = {name: float(value) for name, value in trainer.callback_metrics.items()}
    log.info("Final metrics: %s", {k: round(v, 4) for k, v in sorted(metrics.items())})
    return metrics


@hydra.main(version_base="1.3", config_path="../conf", config_name="train")
def main(cfg: DictConfig) -> Any:
    """Command-line entry; returns the optimized metric for hyperparameter sweepers. In a
    multirun, a failing job is recorded and returns None, and the sweep goes on."""
    with sweep_job(cfg):
        metrics = train(cfg)
        return None if cfg.get("dry_run") else optimized_value(cfg, metrics)
    return None


if __name__ == "__main__":
    run_cli(main)
