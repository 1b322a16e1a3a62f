"""What every run writes to MLflow up front: the flattened config, tags and config.yaml."""

from __future__ import annotations

import contextlib
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig, OmegaConf

from src.tracking.run_logger import mlflow_loggers, record_error
from src.runs.preemption import Preempted
from src.utils.resolvers import PROJECT_ROOT
from src.tracking.sweep import sweep_tags


def flatten(config: Any, prefix: str = "") -> dict[str, Any]:
    """{'algo': {'kl_beta': 0.1}} -> {'algo.kl_beta': 0.1}; lists stay whole values."""
    if not isinstance(config, dict):
        return {prefix: config}
    flat: dict[str, Any] = {}
    for key, value in config.items():
        name = f"{prefix}.{key}" if prefix else str(key)
        flat.update(flatten(value, name) if isinstance(value, dict) and value else {name: value})
    return flat


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
        for group in ("task", "policy", "reward", "model", "data", "algo")
    }


def record_run(
    loggers: list[Any],
    cfg: DictConfig,
    tags: dict[str, str] | None = None,
    data_report: dict[str, Any] | None = None,
) -> None:
    """Log params, tags (plus any `tags` given; inside a multirun the sweep's), the resolved
    config and, when given, the data report (tag `data_source`, params `data_report.*`,
    `data_report.json`) to every MLflow logger."""
    resolved = OmegaConf.to_container(cfg, resolve=True)
    params = {
        key: value for key, value in flatten(resolved).items() if not key.endswith("_target_")
    }
    tags = {
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
            path.write_text(OmegaConf.to_yaml(cfg, resolve=True))
            # A continued run keeps its first config.yaml; each continuation's goes beside it.
            resumes = getattr(logger, "resumes", 0)
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
) -> Iterator[None]:
    """Open the run's record (params, tags, config, data report) and close it FINISHED, or
    FAILED with the error attached if the body raises, so that no run is left RUNNING and
    nothing logged before a failure is lost."""
    try:
        record_run(loggers, cfg, tags, data_report)
        yield
    except BaseException as error:
        for logger in mlflow_loggers(loggers):
            # Never hide the run's own error behind a logging one.
            with contextlib.suppress(Exception):
                record_error(logger.experiment, logger.run_id, error)
        # A signal that stopped the run with its checkpoint is KILLED: the run can continue.
        status = "KILLED" if isinstance(error, Preempted) else "failed"
        for logger in loggers:
            logger.finalize(status)
        raise
    for logger in loggers:
        getattr(logger, "end_run", logger.finalize)()


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
