"""Adversarial rounds (`rounds.count`): a judge GRPO cannot game by the time GRPO trains against it.

A policy trained by GRPO against a frozen judge finds the fills that judge scores high without
them being text: fills it never saw as negatives (runs of one letter, of spaces). So the judge
is trained in rounds. Round 1's judge is the judge stage's. In each later round r, GRPO trains
a policy from the pretrained generator against judge r-1, exactly as the run's own GRPO will
(the same algo, sampler, role and reward settings, `rounds.grpo_steps` steps), and judge r
continues judge r-1 for `rounds.judge_steps` steps with the fills of every earlier round's
policy among its negatives (`replay`, `rounds.replay_share` of them: a replay, so no round's
trick is forgotten). The run's GRPO then trains against the last judge.

Each round is cached like a stage, under `rounds.cache_dir`, in a folder named by the round's
number and a hash of everything that shapes it (the stages' settings and folders, the algo,
rollout and reward settings, the rounds' settings but their count), so `rounds.count=4` after
`rounds.count=3` trains one more round only. A round's folder holds `policy/` and `judge/`.
Each round's policy is scored greedily on the held-out windows by its own judge and logged as
`round<r>/judge`, `round<r>/char_accuracy` and `round<r>/degenerate_spans`. `src.eval` scores
with the last round's judge when the rounds are cached (`rounds_judge`). The task reaches the
rounds through its `before_grpo` hook (`AdversarialRounds`, src/runs/hooks.py).
"""

from __future__ import annotations

import copy
import json
import logging
import shutil
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import lightning as L
from omegaconf import DictConfig, OmegaConf

from src.model.saved import saved_kind
from src.pretraining.folders import DONE, stage_checkpoint
from src.recipes.char_diffusion.settings import SETTINGS
from src.runs.length import RunLength
from src.runs.parts import RunParts, grpo_module
from src.tracking.run_logger import mlflow_loggers
from src.utils.config import build, settings_hash
from src.utils.errors import ConfigError
from src.utils.folders import published_folder
from src.utils.progress import StepProgressBar
from src.utils.setting import Declared

log = logging.getLogger(__name__)
POLICY, JUDGE = "policy", "judge"  # a round folder's subfolders


@dataclass(frozen=True)
class RoundsSettings(Declared):
    """`rounds.*` (conf/task/char_diffusion.yaml says what each does), declared with the
    task's keys (src/recipes/char_diffusion/settings.py), read once by the rounds' step."""

    SECTION = "rounds"
    TABLE = SETTINGS

    count: int = 1
    stage: str = "judge"
    grpo_steps: int | None = None  # null: the run's steps
    judge_steps: int = 500
    replay_share: float = 0.5
    replay_temperatures: list[float] | None = None
    cache_dir: str = "outputs/cache/char_rounds"

    def policy_steps(self, length: RunLength) -> int:
        """GRPO steps of each round's policy: `grpo_steps`, or where it is null (as
        `${trainer.max_steps}` is under `epochs=N`) the run's own."""
        return length.max_steps if self.grpo_steps is None else self.grpo_steps


class AdversarialRounds:
    """The rounds as a `before_grpo` step (`src.runs.hooks.BeforeGrpo`): built with the settings
    check, it reads the rounds' settings once and refuses rounds that continue no stage of the
    task (their temperatures are declared with the task's keys)."""

    def __init__(self, rounds: dict[str, Any], stages: list[str]) -> None:
        if not isinstance(rounds, dict) or not isinstance(stages, list):
            raise ConfigError(
                "before_grpo.rounds takes the rounds' settings and the stages' names "
                f"(rounds: ${{rounds}}, stages: ${{oc.dict.keys:stages}}), got {rounds!r} and "
                f"{stages!r}; leave them as conf/task/char_diffusion.yaml sets them"
            )
        if int(rounds.get("count", 1)) > 1 and rounds.get("stage") not in stages:
            raise ConfigError(
                f"rounds.stage={rounds.get('stage')!r} names no stage of this task; its "
                f"stages are {list(stages)} (or set rounds.count=1)"
            )
        self.settings = RoundsSettings.of(rounds, "the adversarial rounds")

    def before_training(self, cfg: DictConfig, parts: RunParts) -> RunParts:
        return adversarial_rounds(cfg, parts, self.settings)

    def before_evaluation(self, cfg: DictConfig, parts: RunParts) -> RunParts:
        return rounds_judge(cfg, parts, self.settings)


def adversarial_rounds(cfg: DictConfig, parts: RunParts, rounds: RoundsSettings) -> RunParts:
    """Run (or load from the cache) rounds 2..`rounds.count`; return `parts` with the reward
    scoring by the last round's judge (tagged `rounds.judge`); `cfg` is left as it is.
    Without rounds, in a dry run, or with a judge the user gave, `parts` as they are."""
    if rounds.count > 1 and cfg.get("dry_run"):
        log.info("Rounds: a dry run trains none (GRPO would face round %d's judge)", rounds.count)
        return parts
    folders = round_folders(cfg, rounds, parts.length)
    if not folders:
        return parts
    stage, key = judge_stage(cfg, rounds)
    current = copy.deepcopy(cfg)  # its judge key follows the rounds; ${stage:judge} reads it
    policies: list[str] = []
    for number, folder in enumerate(folders, start=2):
        if not (folder / DONE).exists():
            shutil.rmtree(folder, ignore_errors=True)  # an interrupted attempt
            with published_folder(folder) as partial:
                summary = train_round(current, parts, rounds, number, policies, partial)
                (partial / DONE).write_text(json.dumps(summary, indent=2, default=str))
        summary = json.loads((folder / DONE).read_text())
        record_round(parts.loggers, number, folder, summary)
        policies.append(str(folder / POLICY))
        current[key] = str(folder / JUDGE)
    log.info(
        "Rounds: GRPO trains against round %d's judge, %s",
        len(folders) + 1,
        current[key],
    )
    return with_judge(current, parts, stage)


def rounds_judge(cfg: DictConfig, parts: RunParts, rounds: RoundsSettings) -> RunParts:
    """For scoring (src.eval): `parts` with the reward scoring by the last round's judge, the
    one the run's GRPO trained against, when every round is cached; else `parts` as they are,
    with a warning naming the judge that scores instead. Trains nothing."""
    folders = round_folders(cfg, rounds, parts.length)
    if not folders:
        return parts
    stage, key = judge_stage(cfg, rounds)
    missing = [folder for folder in folders if not (folder / DONE).exists()]
    if missing:
        log.warning(
            "Rounds: %s is not trained (python -m src.train with these settings trains it), "
            "so the judge of %s=%s scores instead of the last round's",
            missing[0],
            key,
            stage_checkpoint(stage, cfg),
        )
        return parts
    current = copy.deepcopy(cfg)
    current[key] = str(folders[-1] / JUDGE)
    log.info("Rounds: scoring with round %d's judge, %s", len(folders) + 1, current[key])
    return with_judge(current, parts, stage)


def round_folders(cfg: DictConfig, rounds: RoundsSettings, length: RunLength) -> list[Path]:
    """The cache folders of rounds 2..`rounds.count` under cfg's settings, trained or not;
    none without rounds or when the user gave the judge (it is used as it is)."""
    if rounds.count <= 1:
        return []
    stage, key = judge_stage(cfg, rounds)
    if cfg.get(key) is not None:
        log.info("Rounds: %s=%s was given, so it is the judge (no rounds)", key, cfg[key])
        return []
    shaping = rounds_key(cfg, rounds, length)
    return [
        Path(rounds.cache_dir) / f"round{number}-{round_hash(shaping, number)}"
        for number in range(2, rounds.count + 1)
    ]


def judge_stage(cfg: DictConfig, rounds: RoundsSettings) -> tuple[str, str]:
    """The stage the rounds continue (`rounds.stage`) and the key that gives its folder
    (AdversarialRounds: the stage exists)."""
    return rounds.stage, str(cfg.stages[rounds.stage].checkpoint_key)


def with_judge(current: DictConfig, parts: RunParts, stage: str) -> RunParts:
    """`parts` with the reward built from `current` (its judge key set), the judge's folder
    tagged `rounds.judge`."""
    judge = stage_checkpoint(stage, current)
    for logger in mlflow_loggers(parts.loggers):
        logger.experiment.set_tag(logger.run_id, "rounds.judge", str(judge))
    return replace(parts, reward=build(current.reward))


def rounds_key(cfg: DictConfig, rounds: RoundsSettings, length: RunLength) -> dict[str, Any]:
    """What shapes every round, the number of rounds aside."""
    shaping = {**asdict(rounds), "grpo_steps": rounds.policy_steps(length)}
    shaping.pop("count")
    shaping.pop("cache_dir")
    return {
        "stage_folder": stage_checkpoint(rounds.stage, cfg),  # named by its settings
        "algo": OmegaConf.to_container(cfg.algo, resolve=True),
        "rollout": OmegaConf.to_container(cfg.rollout, resolve=True),
        "reward": OmegaConf.to_container(cfg.reward, resolve=True),
        "rounds": shaping,
    }


def round_hash(shaping: dict[str, Any], number: int) -> str:
    return settings_hash({**shaping, "round": number})


def train_round(
    cfg: DictConfig,
    parts: RunParts,
    rounds: RoundsSettings,
    number: int,
    policies: list[str],
    folder: Path,
) -> dict[str, Any]:
    """Round `number`: GRPO against the current judge (cfg's judge key) into `folder/policy`,
    then the judge continued with every policy so far replayed, into `folder/judge`."""
    stage = cfg.stages[rounds.stage]
    judge = stage_checkpoint(rounds.stage, cfg)
    steps = rounds.policy_steps(parts.length)
    log.info("Round %d: GRPO for %d steps against %s", number, steps, judge)
    results = train_policy(cfg, parts, number, steps, folder / POLICY)
    replay = [*policies, str(folder / POLICY)]
    negatives = dict(OmegaConf.to_container(stage.train.negatives, resolve=True))
    negatives.pop("replay", None)
    share = rounds.replay_share
    negatives["replay"] = share / (1 - share) * sum(negatives.values())
    trained = build(
        stage.train,
        max_steps=rounds.judge_steps,
        negatives=negatives,
        replay=replay,
        init=judge,
        name=f"round{number}_judge",
        replay_temperatures=rounds.replay_temperatures,
    )(folder / JUDGE, cfg, parts.datamodule, parts.loggers, False)
    return {"judge_trained_against": judge, "policy": results, "judge": trained}


def train_policy(
    cfg: DictConfig, parts: RunParts, number: int, steps: int, folder: Path
) -> dict[str, float]:
    """GRPO of the pretrained generator against the judge cfg names for `steps` steps, with the
    run's algo, sampler and role; saved into `folder`. Returns the policy's greedy held-out
    scores by that judge."""
    lm = build(cfg.model)
    module = grpo_module(parts, lm, reward=build(cfg.reward))
    common = {
        "logger": False,
        "enable_checkpointing": False,
        "enable_model_summary": False,
        "accelerator": cfg.trainer.accelerator,
        "precision": cfg.trainer.get("precision"),
        "devices": 1,
    }
    trainer = L.Trainer(
        max_steps=steps,
        limit_val_batches=0,
        num_sanity_val_steps=0,
        callbacks=[StepProgressBar(label=f"round {number} GRPO")],
        **common,
    )
    trainer.fit(module, datamodule=parts.datamodule)
    checker = L.Trainer(enable_progress_bar=False, **common)
    checker.validate(module, datamodule=parts.datamodule, verbose=False)
    lm.save(folder)
    if saved_kind(folder) is None:
        raise RuntimeError(f"round {number}'s policy was not saved into {folder}")
    return {
        name: float(value)
        for name, value in checker.callback_metrics.items()
        if name.startswith("eval/")
    }


def record_round(loggers: list[Any], number: int, folder: Path, summary: dict[str, Any]) -> None:
    """The round's folder as a tag and its policy's held-out scores as metrics of the run."""
    metrics = {
        f"round{number}/{name.rsplit('/', 1)[-1]}": value
        for name, value in summary["policy"].items()
    }
    log.info("Round %d (%s): %s", number, folder, {k: round(v, 4) for k, v in metrics.items()})
    for logger in mlflow_loggers(loggers):
        logger.experiment.set_tag(logger.run_id, f"round.{number}", str(folder))
    for logger in loggers:
        logger.log_metrics(metrics, step=0)
