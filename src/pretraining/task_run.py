"""A stage that is a training run of another task: `task=medqa_searcher` starts from the adapter
that `task=medqa_rewriter` trains.

The stage runs `python -m src.train task=TASK seed=SEED save_model=FOLDER
paths.output_root=ROOT OVERRIDES...` as a process of its own, so the other task's run is an
ordinary run: its own run folder, log and MLflow run, its memory freed when it ends. Its saved
policy (a LoRA adapter) becomes the stage's folder. A dry run trains nothing: the stage's
folder then holds a fresh, untrained adapter on the configured model.
"""

from __future__ import annotations

import logging
import shlex
import sys
import time
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

from src.model.saved import LORA_ADAPTER, holds
from src.utils.child import run_bound
from src.utils.config import build
from src.utils.errors import ConfigError, UserError
from src.utils.resolvers import PROJECT_ROOT

log = logging.getLogger(__name__)


def task_command(cfg: DictConfig, folder: Path, task: str, overrides: list[str]) -> list[str]:
    """The command line of the other task's run, writing its policy into `folder`."""
    if not isinstance(task, str) or not task:
        raise ConfigError(f"a task stage's train.task must name a task (conf/task/), got {task!r}")
    if not isinstance(overrides, list) or not all(isinstance(o, str) for o in overrides):
        raise ConfigError(
            f"a task stage's train.overrides must be a list of KEY=VALUE strings, got {overrides!r}"
        )
    return [
        sys.executable,
        "-m",
        "src.train",
        f"task={task}",
        f"seed={cfg.seed}",
        f"save_model={folder}",
        f"paths.output_root={cfg.paths.output_root}",
        *overrides,
    ]


def train_task(
    folder: Path,
    cfg: DictConfig,
    datamodule: Any,
    loggers: list[Any],
    untrained: bool,
    *,
    task: str,
    overrides: list[str] | None = None,
) -> dict[str, Any]:
    """Train the stage into `folder` by running `task` (the signature of every stage's
    `train`); returns the summary written beside it. `untrained` (a dry run) saves a fresh
    adapter on this run's model instead."""
    overrides = list(overrides or [])
    command = task_command(cfg, folder, task, overrides)
    if untrained:
        settings = OmegaConf.to_container(cfg.model, resolve=True)
        settings["adapter_path"] = None  # the stage's own folder, not written yet
        build(OmegaConf.create(settings)).save(folder, merge=False)
        return {"task": task, "trained": False}
    printed = shlex.join(["python", *command[1:]])
    log.info("Stage run: %s", printed)
    start = time.monotonic()
    returncode = run_bound(command, cwd=PROJECT_ROOT)  # ends if this run is stopped
    if returncode != 0:
        raise UserError(
            f"the {task} run this stage needs failed (exit {returncode}); its log is "
            f"in its run folder under {cfg.paths.output_root}/runs/{task}/. Its command: "
            f"{printed}"
        )
    if not holds(folder, LORA_ADAPTER):
        raise UserError(
            f"the {task} run saved no LoRA adapter in {folder}: its model needs model.lora set"
        )
    return {"task": task, "command": printed, "seconds": round(time.monotonic() - start, 1)}
