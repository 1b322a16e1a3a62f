"""What every entry point builds before any model loads: the algorithm's settings (once), seeded
data, role, reward, sampler, optimizer and schedule, loggers; and the GRPO module from them."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import lightning as L
from omegaconf import DictConfig

from src.data.datamodule import PromptDataModule
from src.data.learnability import SamplingSettings
from src.evaluation.sampled import named
from src.evaluation.settings import EvalSettings, RoomSettings
from src.grpo.module import GRPOModule
from src.grpo.settings import AlgoSettings
from src.model.network import PolicyNetwork, Scorer
from src.model.saved import saved_model_settings
from src.policy.role import Role, SearchingRole
from src.pretraining.stages import check_stage_settings, stage_notes
from src.retrieval.retriever import Retriever
from src.reward.combine import CombinedReward
from src.rollout.multi_turn import MultiTurnSampler, TurnSampler
from src.rollout.sampler import Sampler
from src.runs.hooks import BeforeGrpo, before_grpo_steps
from src.runs.length import RunLength, run_length
from src.runs.resume import ResumePoint
from src.runs.settings import check_settings
from src.sft.sft_settings import SftSettings
from src.sft.warm_start import warm_start
from src.utils.allocator import keep_freed_memory
from src.utils.config import build, plain
from src.utils.errors import ConfigError, UserError
from src.utils.quiet import quiet_foreign_lines

log = logging.getLogger(__name__)


@dataclass
class RunParts:
    """The pieces `train`, `evaluate` and the pipeline stages share."""

    datamodule: PromptDataModule
    policy: Role
    reward: CombinedReward
    sampler: Sampler
    loggers: list[Any]
    notes: list[str]  # what the run uses that a report should mention, e.g. untrained stages
    algo: AlgoSettings  # every `algo.*` setting, built and checked once
    length: RunLength  # the run's steps (trainer.max_steps, or what epochs=N gives)
    room: RoomSettings  # every `room.*` setting: the sampled room's
    evaluation: EvalSettings  # every `eval.*` setting: src.eval's heads and split
    sft: SftSettings  # every `sft.*` setting: the supervised warm start's
    optimizer: Callable[..., Any]  # `algo.optimizer`: takes the trained parameters
    scheduler: Callable[..., Any] | None  # `algo.scheduler`: takes the optimizer
    # the role (searching its own textbook) and sampler of `data.unseen`; None without one
    unseen: tuple[Role, Sampler] | None = None
    # the task's `before_grpo` steps (src/runs/hooks.py), built once with the settings check
    before_grpo: list[BeforeGrpo] = field(default_factory=list)


def build_run_parts(cfg: DictConfig, resume: ResumePoint | None = None) -> RunParts:
    """Check the settings, set the allocator (`keep_freed_memory`), seed, load and check the
    data (bad settings and bad rows fail here, before any model loads), then build the role,
    reward, sampler and loggers; continuing from `resume`, the MLflow loggers reopen the
    checkpoint's run. The config is only read: what the run derives (its length) is held in
    its parts."""
    algo = check_settings(cfg)
    room = RoomSettings.of_section(cfg.get("room"), "the sampled room")
    evaluation = EvalSettings.of_section(cfg.get("eval"))
    sft = SftSettings.of_section(cfg.get("sft"), "the SFT warm start")
    before_grpo = before_grpo_steps(cfg)  # each refuses its own settings, before anything loads
    check_stage_settings(cfg)  # every stage's settings, before the first one trains
    quiet_foreign_lines()
    if cfg.get("keep_freed_memory", True):
        keep_freed_memory()  # before any model or batch is allocated
    notes = stage_notes(cfg)  # e.g. the generator's folder: given, cached, or to train
    L.seed_everything(cfg.seed, workers=True)
    datamodule = build(cfg.data)
    datamodule.prepare_rows()
    reward: CombinedReward = build(cfg.reward)
    datamodule.drop_rows_without(reward.required_fields())  # e.g. accuracy: a gold final answer
    draw_training_prompts(cfg, datamodule, reward, room)  # sampling=learnability: by p(1-p)
    length = run_length(cfg, datamodule, algo)  # epochs=N: steps from the training rows
    policy = build(cfg.policy, **checked_retriever(cfg))
    unseen = unseen_role(cfg, datamodule) if datamodule.unseen_rows else None
    return RunParts(
        datamodule=datamodule,
        policy=policy,
        reward=reward,
        sampler=role_sampler(policy, build(cfg.rollout)),
        loggers=[build_logger(logger, resume) for logger in cfg.get("logger", {}).values()],
        notes=notes,
        algo=algo,
        length=length,
        room=room,
        evaluation=evaluation,
        sft=sft,
        optimizer=build(cfg.algo.optimizer),
        scheduler=length.schedule(cfg.algo),  # None: a constant learning rate
        unseen=unseen,
        before_grpo=before_grpo,
    )


def warm_started(cfg: DictConfig, parts: RunParts, loggers: list[Any] | None = None) -> Path:
    """The folder of the SFT warm start of this run's parts (trained first where not cached),
    logged to `loggers` (default: the parts' own)."""
    return warm_start(
        cfg,
        parts.sft,
        parts.datamodule,
        parts.policy,
        parts.reward,
        parts.sampler,
        parts.loggers if loggers is None else loggers,
    )


def draw_training_prompts(
    cfg: DictConfig, datamodule: PromptDataModule, reward: CombinedReward, room: RoomSettings
) -> None:
    """With `sampling=learnability`, the datamodule draws training prompts by their success
    rates, read from the reward function `room.success` names; a reward without one is
    refused here, before any model loads."""
    settings = SamplingSettings.of(plain(cfg.get("sampling") or {}), "sampling")
    if settings.order != "learnability":
        return
    success = named(reward, "room.success", room.success)
    if success is None:
        raise ConfigError(
            "sampling=learnability draws prompts by their success rate, and room.success names "
            f"no 0/1 function of this run's reward ({', '.join(sorted(reward.functions))}): "
            "set room.success=NAME of one, or use sampling=uniform"
        )
    datamodule.draw_by_learnability(settings, success)


def unseen_role(
    cfg: DictConfig, datamodule: PromptDataModule, **overrides: Any
) -> tuple[Role, Sampler]:
    """The role that scores the unseen split (`data.unseen`): the policy's, searching that
    split's own textbook (`data.unseen.corpus`) where it retrieves, with `overrides` (an eval
    head's policy settings); and its sampler (a searching role's own)."""
    corpus = datamodule.settings.unseen_corpus
    if corpus is not None and not retrieves(cfg):
        raise ConfigError(
            f"data.unseen.corpus={corpus} is set but this run's policy retrieves nothing (it "
            "has no retriever): set data.unseen.corpus=null"
        )
    try:
        retriever = checked_retriever(cfg, corpus)
    except UserError as error:  # the corpus that failed is data.unseen's
        if corpus is None:
            raise
        raise type(error)(str(error).replace("retrieval.corpus", "data.unseen.corpus")) from None
    role = build(cfg.policy, **retriever, **overrides)
    return role, role_sampler(role, build(cfg.rollout))


def prepare_roles(parts: RunParts, lm: PolicyNetwork) -> dict[str, float]:
    """Each role's preparation over its rows (e.g. plans, once and cached): the policy's over
    the training and held-out rows, the unseen split's role over its rows."""
    datamodule = parts.datamodule
    figures = parts.policy.prepare(lm, datamodule.train_rows + datamodule.val_rows)
    if parts.unseen is not None:
        parts.unseen[0].prepare(lm, datamodule.unseen_rows)
    return figures


def grpo_module(
    parts: RunParts,
    lm: PolicyNetwork,
    reward: CombinedReward | None = None,
    reference: Scorer | None = None,
) -> GRPOModule:
    """The GRPO module of the run's settings, role, sampler and `reward` (the run's by
    default) over `lm`; `reference`: a loaded KL reference (None: the initial policy)."""
    module = GRPOModule(
        lm,
        parts.sampler,
        parts.policy,
        reward or parts.reward,
        parts.optimizer,
        parts.scheduler,
        parts.algo,
        reference,
    )
    if parts.unseen is not None:  # the datamodule's second held-out loader
        module.add_held_out("eval_unseen", *parts.unseen)
    return module


def retrieves(cfg: DictConfig) -> bool:
    """Whether the run's role takes a retriever (`policy.retriever`) and one is configured."""
    return cfg.get("retrieval") is not None and "retriever" in cfg.policy


def checked_retriever(cfg: DictConfig, corpus: str | None = None) -> dict[str, Retriever]:
    """The policy's retriever, built once with its corpus (or `corpus`) loaded and checked (a
    missing, empty or malformed corpus fails here, before any model loads); {} for roles
    without one."""
    if not retrieves(cfg):
        return {}
    retriever: Retriever = build(cfg.retrieval, **({"corpus": corpus} if corpus else {}))
    retriever.check()
    return {"retriever": retriever}


def build_logger(conf: DictConfig, resume: ResumePoint | None) -> Any:
    """One configured logger; an MLflow logger of the store the checkpoint's run lives in
    reopens that run, so a continued run keeps one history."""
    run_id = resume.mlflow_runs.get(conf.get("tracking_uri")) if resume else None
    if run_id is None:
        if resume is not None and conf.get("tracking_uri") is not None:
            log.warning(
                "The checkpoint names no MLflow run in %s; the continuation starts a new run",
                conf.tracking_uri,
            )
        return build(conf)
    logger = build(conf, run_id=run_id)
    logger.reopen(resume.step, str(resume.checkpoint))
    log.info("Continuing MLflow run %s", run_id)
    return logger


def load_reference(cfg: DictConfig, algo: AlgoSettings) -> Scorer | None:
    """The KL reference saved at `algo.ref_model_path` (an adapter on the configured base
    `cfg.model`, or a full model), frozen; None when unset, and the initial policy is the
    reference."""
    path = algo.ref_model_path
    if not path or not algo.uses_kl:
        return None
    log.info("KL reference: %s", path)
    reference = build(cfg.model, **saved_model_settings(path))
    return reference.eval().requires_grad_(False)


def log_figures(loggers: list[Any], figures: dict[str, float], step: int = 0) -> None:
    """Log figures of the run's preparation (cache hits, seconds) to every logger."""
    if figures:
        for logger in loggers:
            logger.log_metrics(figures, step=step)


def role_sampler(policy: Role, sampler: Sampler) -> Sampler:
    """The configured sampler, or for a role whose completions search (`SearchingRole`) the
    multi-turn rollout around it, each turn drawn by the configured sampler."""
    if not isinstance(policy, SearchingRole):
        return sampler
    if not isinstance(sampler, TurnSampler):
        raise ConfigError(
            f"this policy searches in turns, which {type(sampler).__name__} cannot sample "
            "(it draws no tokens after token prompts): use rollout=hf"
        )
    return MultiTurnSampler(sampler, policy.search_tool(), policy.max_searches, policy.tags)
