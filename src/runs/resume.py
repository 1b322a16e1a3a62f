"""Continuing a stopped run: which checkpoint `ckpt_path` names (a file, a run folder, or
`last`), and which MLflow run that checkpoint belongs to, so the continuation writes into it."""

from __future__ import annotations

import logging
import pickle
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import lightning as L
import torch
from lightning.pytorch.callbacks import Callback
from omegaconf import DictConfig, OmegaConf

from src.tracking.run_logger import mlflow_loggers
from src.utils import per_machine
from src.utils.config import build
from src.utils.errors import ConfigError

log = logging.getLogger(__name__)
LAST = "last.ckpt"
CHECKPOINTS = "callbacks.checkpoint.dirpath"  # where a run writes its checkpoints


class ResumeError(ConfigError):
    """`ckpt_path` names no usable checkpoint; the message says what was looked for."""


@dataclass(frozen=True)
class ResumePoint:
    """A checkpoint to continue from: its file, its optimizer step and its MLflow runs."""

    checkpoint: Path
    step: int
    mlflow_runs: dict[str, str] = field(default_factory=dict)  # tracking URI -> run id


class MlflowRunInCheckpoint(Callback):
    """Writes into every checkpoint what continuing from it needs of the run: the MLflow run of
    each MLflow logger, so that the continuation logs into the same run, and the per-machine
    choices the run made (`src.utils.per_machine`: which product kernels), so that the
    continuation takes the same ones and ends where the run would have ended."""

    def on_save_checkpoint(
        self, trainer: L.Trainer, pl_module: L.LightningModule, checkpoint: dict[str, Any]
    ) -> None:
        checkpoint["mlflow"] = {
            logger._tracking_uri: logger.run_id for logger in mlflow_loggers(trainer.loggers)
        }
        checkpoint["machine_choices"] = per_machine.chosen_values()


def find_checkpoint(spec: str, runs_folder: Path, current_run: Path | None = None) -> Path:
    """The checkpoint file `ckpt_path=spec` names: `last` is the most recently written
    `checkpoints/last.ckpt` of the runs in `runs_folder` (this run's own folder aside); a
    folder is a run folder (its `checkpoints/last.ckpt`) or a checkpoints folder."""
    if spec == "last":
        found = [
            path
            for path in runs_folder.glob(f"*/checkpoints/{LAST}")
            if current_run is None or path.parent.parent.resolve() != current_run.resolve()
        ]
        if not found:
            raise ResumeError(
                f"ckpt_path=last: no run folder in {runs_folder} holds checkpoints/{LAST}; "
                "a run writes it every callbacks.checkpoint.every_n_train_steps steps and when "
                "it is stopped by SIGTERM or Ctrl-C. Pass a run folder or a checkpoint file instead"
            )
        return max(found, key=lambda path: path.stat().st_mtime)
    path = Path(spec)
    if path.is_dir():
        for candidate in (path / "checkpoints" / LAST, path / LAST):
            if candidate.is_file():
                return candidate
        beside = path.parent / "checkpoints" / LAST  # e.g. RUN/model, the saved policy
        if beside.is_file():
            raise ResumeError(
                f"ckpt_path={spec}: that folder holds no checkpoint; its run's checkpoint is "
                f"{beside}: pass ckpt_path={path.parent} (the run folder)"
            )
        raise ResumeError(
            f"ckpt_path={spec}: the folder holds no checkpoints/{LAST}; the run stopped "
            "before its first checkpoint (callbacks.checkpoint.every_n_train_steps)"
        )
    if path.is_file():
        return path
    raise ResumeError(f"ckpt_path={spec}: no checkpoint file or run folder there")


def read_checkpoint(path: Path) -> dict[str, Any]:
    """Load a checkpoint with `weights_only=True`: tensors and plain data only, so a
    checkpoint from elsewhere cannot run code when it is opened."""
    try:
        return torch.load(path, map_location="cpu", weights_only=True, mmap=True)
    except (pickle.UnpicklingError, RuntimeError, OSError) as error:
        raise ResumeError(f"ckpt_path={path}: cannot be read as a checkpoint ({error})") from None


def resume_point(cfg: DictConfig) -> ResumePoint | None:
    """Where `cfg.ckpt_path` continues from, or None for a fresh run."""
    spec = cfg.get("ckpt_path")
    if spec is None:
        return None
    run_dir = Path(cfg.paths.run_dir)
    path = find_checkpoint(str(spec), run_dir.parent, run_dir)
    checkpoint = read_checkpoint(path)
    point = ResumePoint(path, int(checkpoint.get("global_step", 0)), checkpoint.get("mlflow", {}))
    per_machine.pin(  # the kernels the run chose, whatever this machine's load says now
        dict(checkpoint.get("machine_choices") or {}),
        f"as the run continued chose ({path.name}, step {point.step})",
    )
    log.info("Continuing from step %d of %s", point.step, path)
    return point


def checkpoint_folder(cfg: DictConfig, resume: ResumePoint | None) -> Path | None:
    """Where the run writes its checkpoints: `callbacks.checkpoint.dirpath`, or, continuing,
    beside the checkpoint it continued from, so `ckpt_path=last` finds the newest again after
    a second stop; None without a checkpoint callback."""
    folder = OmegaConf.select(cfg, CHECKPOINTS, default=None, throw_on_resolution_failure=False)
    if folder is None:
        return None
    return resume.checkpoint.parent if resume is not None else Path(str(folder))


def resumed_settings(cfg: DictConfig, resume: ResumePoint | None) -> dict[str, str]:
    """What continuing changes of the run's settings, for its record: the checkpoint folder."""
    folder = checkpoint_folder(cfg, resume)
    return {CHECKPOINTS: str(folder)} if resume is not None and folder is not None else {}


def run_callbacks(cfg: DictConfig, resume: ResumePoint | None) -> list[Callback]:
    """The configured callbacks, the checkpoint callback writing into `checkpoint_folder`."""
    folder = checkpoint_folder(cfg, resume)
    return [
        build(conf, **({"dirpath": str(folder)} if name == "checkpoint" and folder else {}))
        for name, conf in (cfg.get("callbacks") or {}).items()
    ]
