"""Stages that train models a recipe needs before GRPO, each cached like the SFT warm start.

`cfg.stages` names them in order (`task=char_diffusion`: the generator, then its judge;
`task=medqa_searcher`: the query rewriter, a run of its own task). Each trains into the folder
`${stage:NAME}` names (src/pretraining/folders.py: the one its `checkpoint_key` gives, or its
cache folder keyed by what shapes it), unless that folder already holds its model; a given
folder is checked before anything loads.
"""

from __future__ import annotations

import json
import logging
import shutil
from pathlib import Path
from typing import Any

from omegaconf import DictConfig

from src.data.datamodule import PromptDataModule
from src.model.saved import holds, saved_kind
from src.pretraining.folders import DONE, stage_checkpoint
from src.tracking.run_logger import mlflow_loggers
from src.utils.config import build, named_object, plain
from src.utils.errors import ConfigError, MissingFileError
from src.utils.folders import published_folder

log = logging.getLogger(__name__)


def check_stage_settings(cfg: DictConfig) -> None:
    """Run each stage's `settings_check` (the dotted name of a function of the stage's `train`
    settings and the config, which raises what the stage would refuse) before any stage
    trains and before data or models load: a wrong setting of a later stage (the judge's)
    costs seconds, not the training of the stages before it. A stage without one is checked
    when it runs."""
    for name, stage in (cfg.get("stages") or {}).items():
        check = stage.get("settings_check")
        if not check:
            continue
        function = named_object(
            str(check),
            f"stages.{name}.settings_check",
            "name the function that checks the stage's settings, or null",
        )
        train = plain(stage.get("train")) or {}
        function({key: value for key, value in train.items() if not key.startswith("_")}, cfg)


def stage_notes(cfg: DictConfig) -> list[str]:
    """One line per stage saying which folder `${stage:NAME}` gives it and why (given, cached,
    to be trained first, or untrained in a dry run); a given folder must hold a model of the
    stage's `kind`. Reads the config, before anything loads."""
    notes = []
    for name, stage in (cfg.get("stages") or {}).items():
        key = stage.checkpoint_key
        given = cfg.get(key)
        folder = stage_checkpoint(name, cfg)
        if given is not None:
            check_given(str(given), key, stage.kind)
            notes.append(f"{name}: {given} (given by {key})")
        elif (Path(folder) / DONE).exists():
            notes.append(f"{name}: {folder} (cached)")
        elif cfg.get("dry_run"):
            notes.append(
                f"{name}: freshly initialised, untrained (none cached yet; a dry run trains nothing)"
            )
        else:
            notes.append(f"{name}: {folder} (trained first)")
    for note in notes:
        log.info("Stage %s", note)
    return notes


def check_given(folder: str, key: str, kind: str) -> None:
    """A folder the user named must exist and hold a model of `kind`."""
    if not Path(folder).is_dir():
        raise MissingFileError(f"{key}={folder}: no such folder; give a saved {kind} folder")
    if not holds(folder, kind):
        found = saved_kind(folder)
        raise ConfigError(
            f"{key}={folder} holds {'no such model' if found is None else repr(found)}, not a "
            f"{kind}; give a folder written by the {kind} stage (or set {key}=null to train one)"
        )


def require_trained_stages(cfg: DictConfig) -> None:
    """For scoring without training (src.eval): every stage's folder must hold its model;
    else one MissingFileError line naming the stage, its folder and how to get it."""
    for name, stage in (cfg.get("stages") or {}).items():
        key = stage.checkpoint_key
        folder = Path(stage_checkpoint(name, cfg))
        if not holds(folder, stage.kind):
            raise MissingFileError(
                f"stage {name} is not trained under these settings ({folder}); python -m "
                f"src.train with the same overrides trains it, or give {key}=FOLDER"
            )


def run_stages(cfg: DictConfig, datamodule: PromptDataModule, loggers: list[Any]) -> None:
    """Train, in order, every stage whose folder is not complete yet, logging to the run."""
    for name, stage in (cfg.get("stages") or {}).items():
        folder = Path(stage_checkpoint(name, cfg))
        for logger in mlflow_loggers(loggers):
            logger.experiment.set_tag(logger.run_id, f"stage.{name}", str(folder))
        if holds(folder, stage.kind):
            log.info("Stage %s: using %s", name, folder)
            continue
        shutil.rmtree(folder, ignore_errors=True)  # an interrupted attempt
        untrained = bool(cfg.get("dry_run"))
        with published_folder(folder) as partial:
            summary = build(stage.train)(partial, cfg, datamodule, loggers, untrained)
            (partial / DONE).write_text(json.dumps(summary, indent=2, default=str))
        log.info("Stage %s: %s -> %s", name, summary, folder)
