"""Stages that train models a recipe needs before GRPO, each cached like the SFT warm start.

`cfg.stages` names them in order (`task=char_diffusion`: the generator, then its judge;
`task=medqa_searcher`: the query rewriter, a run of its own task). A stage fills one top-level
key with a folder (`checkpoint_key`, e.g. `generator_checkpoint`): a folder the user gives is
checked and used as it is; otherwise the key becomes the stage's cache folder, named by a hash
of every setting that shapes its result (model, data, the stage's own settings, the seed and
the folders of the stages before it; a stage with `shaped_by_run: false` is shaped by its own
settings and the seed alone). So the model and reward configs can name the folder
(`${generator_checkpoint}`) before it is trained, and a second run with the same settings goes
straight to GRPO.
"""

from __future__ import annotations

import hashlib
import json
import logging
import shutil
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

from src.data.datamodule import PromptDataModule
from src.model.saved import holds, saved_kind
from src.tracking.run_logger import mlflow_loggers
from src.utils.config import build, named_object, plain
from src.utils.errors import ConfigError, MissingFileError
from src.utils.folders import published_folder

log = logging.getLogger(__name__)
DONE = "stage.json"
UNSHAPING = ("batch_size", "eval_batch_size", "num_batches", "max_val_rows")  # data keys


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


def resolve_stage_checkpoints(cfg: DictConfig) -> list[str]:
    """Point every stage's `checkpoint_key` at a folder before anything loads: a given one
    must hold a model of the stage's `kind`; an unset one becomes the stage's cache folder, or
    in a dry run with nothing cached, an untrained model's folder under the run folder.
    Returns one line per stage saying which folder it uses and why."""
    notes = []
    for name, stage in (cfg.get("stages") or {}).items():
        key = stage.checkpoint_key
        given = cfg.get(key)
        if given is not None:
            check_given(str(given), key, stage.kind)
            notes.append(f"{name}: {given} (given by {key})")
            continue
        folder = stage_folder(cfg, name)
        if (folder / DONE).exists():
            notes.append(f"{name}: {folder} (cached)")
        elif cfg.get("dry_run"):
            folder = Path(cfg.paths.run_dir) / "untrained" / name
            notes.append(
                f"{name}: freshly initialised, untrained (none cached yet; a dry run trains nothing)"
            )
        else:
            notes.append(f"{name}: {folder} (trained first)")
        cfg[key] = str(folder)
    for note in notes:
        log.info("Stage %s", note)
    return notes


def stage_folder(cfg: DictConfig, name: str) -> Path:
    """The cache folder of stage `name` under its settings (the earlier stages' folders set)."""
    return Path(cfg.stages[name].cache_dir) / f"{name}-{cache_key(cfg, name)}"


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


def cache_key(cfg: DictConfig, name: str) -> str:
    """Hash of the settings that determine stage `name`'s model."""
    text = json.dumps(shaping_settings(cfg, name), sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def shaping_settings(cfg: DictConfig, name: str) -> dict[str, Any]:
    """The settings that determine stage `name`'s model: the seed and the stage's own, and
    unless it says `shaped_by_run: false`, the run's model and data, the stages before it and
    their folders, and for a later stage the sampler."""
    shaping: dict[str, Any] = {"seed": cfg.seed}
    if not cfg.stages[name].get("shaped_by_run", True):
        shaping[name] = OmegaConf.to_container(cfg.stages[name].train, resolve=True)
        return shaping
    model = OmegaConf.to_container(cfg.model, resolve=False)
    model.pop("checkpoint", None)
    shaping["model"] = model
    data = OmegaConf.to_container(cfg.data, resolve=True)
    shaping["data"] = {k: v for k, v in data.items() if k not in UNSHAPING}
    for earlier, stage in cfg.stages.items():
        settings = OmegaConf.to_container(stage, resolve=True)
        for unshaping in ("cache_dir", "settings_check"):  # where it is kept, how it is checked
            settings.pop(unshaping, None)
        shaping[earlier] = settings
        if earlier == name:
            break
        shaping[f"{earlier}_folder"] = str(cfg[stage.checkpoint_key])
    if name != next(iter(cfg.stages)):  # later stages sample with the GRPO sampler
        shaping["rollout"] = OmegaConf.to_container(cfg.rollout, resolve=True)
    return shaping


def require_trained_stages(cfg: DictConfig) -> None:
    """For scoring without training (src.eval): every stage's folder must hold its model;
    else one MissingFileError line naming the stage, its folder and how to get it."""
    for name, stage in (cfg.get("stages") or {}).items():
        key = stage.checkpoint_key
        folder = Path(str(cfg[key]))
        if not holds(folder, stage.kind):
            raise MissingFileError(
                f"stage {name} is not trained under these settings ({folder}); python -m "
                f"src.train with the same overrides trains it, or give {key}=FOLDER"
            )


def run_stages(cfg: DictConfig, datamodule: PromptDataModule, loggers: list[Any]) -> None:
    """Train, in order, every stage whose folder is not complete yet, logging to the run."""
    for name, stage in (cfg.get("stages") or {}).items():
        folder = Path(str(cfg[stage.checkpoint_key]))
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
