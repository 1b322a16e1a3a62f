"""What every run writes to MLflow up front: the flattened config, tags and config.yaml."""

from __future__ import annotations

import contextlib
import copy
import logging
import re
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig, OmegaConf

from src.runs.preemption import Interrupted, Stopped, interrupted
from src.runs.resume import CHECKPOINTS, LAST, checkpoint_folder
from src.tracking.run_logger import MLflowRunLogger, mlflow_loggers, record_error
from src.tracking.sweep import sweep_tags
from src.utils.per_machine import choice_descriptions, unused_pins
from src.utils.resolvers import PROJECT_ROOT

log = logging.getLogger(__name__)


def flatten(config: Any, prefix: str = "") -> dict[str, Any]:
    """{'algo': {'kl_beta': 0.1}} -> {'algo.kl_beta': 0.1}; lists stay whole values."""
    if not isinstance(config, dict):
        return {prefix: config}
    flat: dict[str, Any] = {}
    for key, value in config.items():
        name = f"{prefix}.{key}" if prefix else str(key)
        flat.update(flatten(value, name) if isinstance(value, dict) and value else {name: value})
    return flat


def own_folders(resolved: dict[str, Any]) -> list[str]:
    """The folders only this run writes: its run folder and its checkpoint folder (a continued
    run writes its checkpoints into the folder of the run it continues)."""
    run_dir = folder_name((resolved.get("paths") or {}).get("run_dir"))
    checkpoint = (resolved.get("callbacks") or {}).get("checkpoint") or {}
    dirpath = folder_name(checkpoint.get("dirpath"))
    if run_dir and dirpath and run_dir.startswith(dirpath + "/"):
        dirpath = None  # a folder holding the run folder holds other runs' too
    return [folder for folder in (run_dir, dirpath) if folder]


def with_derived(resolved: dict[str, Any], derived: dict[str, Any]) -> dict[str, Any]:
    """The resolved config with each dotted key of `derived` set to its value, so that the
    record shows what ran; the config itself is not changed."""
    record = copy.deepcopy(resolved)
    for key, value in derived.items():
        *parents, last = key.split(".")
        node = record
        for part in parents:
            node = node.setdefault(part, {})
        node[last] = value
    return record


def folder_name(value: Any) -> str | None:
    """`value` without a trailing slash; None when it is no string, or "/" or "."."""
    if not isinstance(value, str) or value.rstrip("/") in ("", "."):
        return None
    return value.rstrip("/")


def names_a_folder(value: Any, folders: list[str]) -> bool:
    """Whether `value` is a string holding one of `folders` (as a whole path component:
    `/out/run` is in `/out/run/model`, not in `/out/run2`)."""
    return isinstance(value, str) and any(
        re.search(re.escape(folder) + r"(?![\w.-])", value) for folder in folders
    )


def split_params(resolved: dict[str, Any]) -> tuple[dict[str, Any], dict[str, str]]:
    """The flattened config (no `_target_`s) as (params, tags): a value naming the run's own
    folder differs between any two runs, so it is a tag, not a param the MLflow compare page
    would plot as an axis."""
    flat = {key: value for key, value in flatten(resolved).items() if not key.endswith("_target_")}
    folders = own_folders(resolved)
    tags = {key: str(value) for key, value in flat.items() if names_a_folder(value, folders)}
    params = {key: value for key, value in flat.items() if key not in tags}
    return params, tags


def git_commit() -> str:
    """The repository's HEAD commit, with '-dirty' when tracked files changed; 'unknown' outside git."""
    try:
        commit = subprocess.run(
            ["git", "rev-parse", "HEAD"],
            cwd=PROJECT_ROOT,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            cwd=PROJECT_ROOT,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return commit + ("-dirty" if dirty else "")


def config_choices(cfg: DictConfig) -> dict[str, str]:
    """Which config of each group was chosen (policy=generator ...), from Hydra when it runs."""
    choices = HydraConfig.get().runtime.choices if HydraConfig.initialized() else {}
    return {
        group: str(choices.get(group, ""))
        for group in ("task", "policy", "reward", "model", "data", "algo", "retrieval")
    }


def record_run(
    loggers: list[Any],
    cfg: DictConfig,
    tags: dict[str, str] | None = None,
    data_report: dict[str, Any] | None = None,
    derived: dict[str, Any] | None = None,
) -> None:
    """Log params, tags (the config values naming the run's folder, plus any `tags` given;
    inside a multirun the sweep's), the resolved config with what the run `derived` from it
    and, when given, the data report (tag `data_source`, params `data_report.*`,
    `data_report.json`) to every MLflow logger."""
    resolved = with_derived(OmegaConf.to_container(cfg, resolve=True), derived or {})
    params, folder_tags = split_params(resolved)
    tags = {
        **folder_tags,
        **config_choices(cfg),
        "task": str(cfg.task_name),
        "git_commit": git_commit(),
        **({"data_source": str(data_report["source"])} if data_report else {}),
        **sweep_tags(cfg),
        **(tags or {}),
    }
    for logger in mlflow_loggers(loggers):
        logger.log_hyperparams(params)
        for key, value in tags.items():
            logger.experiment.set_tag(logger.run_id, key, value)
        with tempfile.TemporaryDirectory() as folder:
            path = Path(folder) / "config.yaml"
            path.write_text(OmegaConf.to_yaml(resolved))
            # A continued run keeps its first config.yaml; each continuation's goes beside it.
            resumes = logger.resumes if isinstance(logger, MLflowRunLogger) else 0
            folder_name = f"resumes/{resumes}" if resumes else None
            logger.experiment.log_artifact(logger.run_id, str(path), folder_name)
    if data_report:
        log_report(loggers, data_report, "data_report.json")


@contextlib.contextmanager
def recorded_run(
    loggers: list[Any],
    cfg: DictConfig,
    tags: dict[str, str] | None = None,
    data_report: dict[str, Any] | None = None,
    derived: dict[str, Any] | None = None,
) -> Iterator[None]:
    """Open the run's record (params, tags, config, data report) and close it FINISHED, or
    FAILED with the error attached if the body raises, so that no run is left RUNNING and
    nothing logged before a failure is lost. A run stopped by a signal or Ctrl-C is KILLED
    instead; a Ctrl-C outside GRPO training leaves as `Interrupted` (exit status 130), naming
    the newest checkpoint of the run's checkpoint folder. `derived`: what the run derived from
    the config (dotted keys: the steps `epochs=N` gave, the folder a continuation writes its
    checkpoints into), recorded in place of what the config says."""
    try:
        record_run(loggers, cfg, tags, data_report, derived)
        yield
    except BaseException as error:
        checkpoints = (derived or {}).get(CHECKPOINTS)
        stop = interruption(error, cfg, Path(checkpoints) if checkpoints else None)
        recorded = stop or error
        for logger in mlflow_loggers(loggers):
            # Never hide the run's own error behind a logging one.
            with contextlib.suppress(Exception):
                record_error(logger.experiment, logger.run_id, recorded)
        # A run stopped on purpose is KILLED, not FAILED: nothing went wrong with it.
        status = "KILLED" if isinstance(recorded, Stopped) else "failed"
        for logger in loggers:
            logger.finalize(status)
        if stop is not None:
            raise stop from error
        raise
    for logger in loggers:
        if isinstance(logger, MLflowRunLogger):
            logger.end_run()  # Lightning's finalize leaves our run open for the next stage
        else:
            logger.finalize("success")


def interruption(
    error: BaseException, cfg: DictConfig, checkpoints: Path | None = None
) -> Interrupted | None:
    """An `Interrupted` for a Ctrl-C that stopped the run at once: a KeyboardInterrupt, or the
    exit status 1 Lightning turns one into (a warm start, an evaluation); None otherwise. Its
    message names the newest checkpoint of the run, if there is one."""
    from_lightning = (
        isinstance(error, SystemExit)
        and not isinstance(error, Stopped)
        and isinstance(error.__context__, KeyboardInterrupt)
    )
    if not (isinstance(error, KeyboardInterrupt) or from_lightning):
        return None
    folder = checkpoints if checkpoints is not None else checkpoint_folder(cfg, None)
    stop = interrupted(
        "Ctrl-C (SIGINT): stopped at once",
        folder / LAST if folder else None,
        "the run has no checkpoint to continue from",
    )
    stop.__cause__ = error  # error.txt keeps the traceback of where the run was
    return stop


def log_artifacts(loggers: list[Any], *paths: str | Path) -> None:
    """Attach files to every MLflow logger's run."""
    for logger in mlflow_loggers(loggers):
        for path in paths:
            logger.experiment.log_artifact(logger.run_id, str(path))


def log_report(loggers: list[Any], report: dict[str, Any], name: str) -> None:
    """Log a small dict as flattened params and as a JSON artifact `name`."""
    params = {
        f"{name.removesuffix('.json')}.{key}": value for key, value in flatten(report).items()
    }
    for logger in mlflow_loggers(loggers):
        logger.log_hyperparams(params)
        logger.experiment.log_dict(logger.run_id, report, name)


def log_machine_choices(loggers: list[Any]) -> None:
    """Each per-machine choice this process made (`src.utils.per_machine`: its value, whether
    it was measured now or kept, when, and the timings behind it) as an MLflow param
    `machine_choice.<name>`; one WARNING for pinned choices this run never asked for."""
    unused = unused_pins()
    if unused:
        sources = sorted(set(unused.values()))
        log.warning(
            "%d choice(s) %s were never asked for by this run (%s): they pinned nothing here; "
            "a file from another machine or of another model's shapes?",
            len(unused),
            " and ".join(sources),
            ", ".join(unused),
        )
    params = {f"machine_choice.{name}": text for name, text in choice_descriptions().items()}
    if not params:
        return
    for logger in mlflow_loggers(loggers):
        logger.log_hyperparams(params)
