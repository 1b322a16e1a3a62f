"""Where each stage's model lives, named before it is trained: `${stage:NAME}` in a config is
the folder of stage NAME. A folder the user gives (the stage's `checkpoint_key`, e.g.
`generator_checkpoint=DIR`) is used as it is; otherwise the stage's cache folder, named by a
hash of every setting that shapes its result (model, data, the stage's own settings, the seed
and the folders of the stages before it; a stage with `shaped_by_run: false` is shaped by its
own settings and the seed alone); in a dry run with nothing cached, an untrained model's
folder under the run folder. The folder is read from the config, never written into it, so a
model or reward config names it (`checkpoint: ${stage:generator}`) before it is trained and a
second run with the same settings finds it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

from src.utils.config import settings_hash
from src.utils.errors import ConfigError

DONE = "stage.json"  # written into a stage's folder when its training completes
UNSHAPING = ("batch_size", "eval_batch_size", "num_batches", "max_val_rows")  # data keys


def register_stage_resolver() -> None:
    """`${stage:NAME}`: `stage_checkpoint(NAME, the whole config)`."""
    if not OmegaConf.has_resolver("stage"):
        OmegaConf.register_new_resolver("stage", resolve_stage)


def resolve_stage(name: str, _root_: DictConfig) -> str:
    """The resolver's function: OmegaConf hands it the root of the config it resolves in."""
    return stage_checkpoint(str(name), _root_)


def stage_checkpoint(name: str, cfg: DictConfig) -> str:
    """The folder of stage `name`'s model: its `checkpoint_key` as given, else its cache
    folder, or in a dry run with nothing cached, an untrained model's folder in the run."""
    stages = cfg.get("stages") or {}
    if name not in stages:
        raise ConfigError(
            f"${{stage:{name}}}: this run has no stage {name} (its stages: "
            f"{', '.join(stages) or 'none'}); name one of them or give the folder itself"
        )
    given = cfg.get(stages[name].checkpoint_key)
    if given is not None:
        return str(given)
    folder = stage_folder(cfg, name)
    if cfg.get("dry_run") and not (folder / DONE).exists():
        folder = Path(cfg.paths.run_dir) / "untrained" / name
    return str(folder)


def stage_folders(cfg: DictConfig) -> set[str]:
    """The folder of every stage of the run (`stage_checkpoint`), trained or not."""
    return {stage_checkpoint(str(name), cfg) for name in cfg.get("stages") or {}}


def stage_folder(cfg: DictConfig, name: str) -> Path:
    """The cache folder of stage `name` under its settings (the earlier stages' folders set)."""
    return Path(cfg.stages[name].cache_dir) / f"{name}-{cache_key(cfg, name)}"


def cache_key(cfg: DictConfig, name: str) -> str:
    """Hash of the settings that determine stage `name`'s model."""
    return settings_hash(shaping_settings(cfg, name))


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
        shaping[f"{earlier}_folder"] = stage_checkpoint(earlier, cfg)
    if name != next(iter(cfg.stages)):  # later stages sample with the GRPO sampler
        shaping["rollout"] = OmegaConf.to_container(cfg.rollout, resolve=True)
    return shaping
