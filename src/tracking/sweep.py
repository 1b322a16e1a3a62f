"""A Hydra multirun, seen from one job: which sweep it belongs to, which values it sweeps, and
how its failure is recorded so that the sweep goes on.

The sweep's parent MLflow run is opened by `src.tracking.sweep_callback.MlflowSweepCallback`,
which hands its id to the jobs through the `GRPO_SWEEP` environment variable: inherited by the
basic launcher (same process), submitit's local launcher (child processes) and SLURM jobs.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
from collections.abc import Iterator, Mapping
from dataclasses import asdict, dataclass
from typing import Any

from hydra.core.hydra_config import HydraConfig
from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.types import RunMode
from omegaconf import DictConfig

from src.tracking.store import experiment_id

log = logging.getLogger(__name__)

SWEEP_ENV = "GRPO_SWEEP"
SEED_KEY = "seed"  # a swept seed makes runs of one configuration, not configurations
ONE_CONFIGURATION = "all runs"  # the configuration of a sweep that varies nothing but the seed

_failed: dict[int, str] = {}  # job number -> its error, for every failed job this process saw


def note_failed(job: int, error: str) -> None:
    """Record that job `job` of this process's sweep failed with `error` (its first line)."""
    _failed.setdefault(job, error.splitlines()[0] if error else "failed")


def forget_failed_jobs() -> None:
    """Start a command with no failed job noted (a test may run several in one process)."""
    _failed.clear()


def failed_jobs() -> dict[int, str]:
    """The failed jobs of the sweep this process ran, by job number: those that failed in this
    process, and those the sweep's parent run found FAILED at its end (any launcher)."""
    return dict(sorted(_failed.items()))


@dataclass(frozen=True)
class Sweep:
    """What every job of one multirun shares: the sweep's id, its parent MLflow run and the
    config keys whose values change from job to job."""

    sweep_id: str
    parent_run_id: str
    swept: tuple[str, ...]

    def to_env(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_env(cls) -> Sweep | None:
        text = os.environ.get(SWEEP_ENV)
        if not text:
            return None
        fields = json.loads(text)
        return cls(fields["sweep_id"], fields["parent_run_id"], tuple(fields["swept"]))


@dataclass(frozen=True)
class MlflowTarget:
    """Where a config's MLflow logger writes: store, experiment, the experiment's artifacts, and
    the run name asked for (None: MLflow's or the sweep's)."""

    tracking_uri: str
    experiment_name: str
    artifact_location: str | None
    run_name: str | None


def mlflow_target(cfg: DictConfig) -> MlflowTarget | None:
    """The first MLflow logger of `cfg.logger`, or None when the run logs elsewhere."""
    for logger in (cfg.get("logger") or {}).values():
        if "mlflow" in str(logger.get("_target_", "")).lower():
            return MlflowTarget(
                str(logger.tracking_uri),
                str(logger.experiment_name),
                logger.get("artifact_location"),
                logger.get("run_name"),
            )
    return None


def sweep_children(client: Any, experiment: str, sweep_id: str) -> list[Any]:
    """Every job run of a sweep (the parent left out), as MLflow `Run`s."""
    return [
        run
        for run in client.search_runs(
            [experiment], filter_string=f"tags.sweep_id = '{sweep_id}'", max_results=50000
        )
        if run.data.tags.get("sweep_role") != "parent"
    ]


def keyed_overrides(overrides: list[str]) -> list[tuple[str, Any]]:
    """(key, override) pairs of command-line overrides, the key without its '+'/'~' prefix and
    `@package` suffix (the parser keeps those apart)."""
    return [(o.key_or_group, o) for o in OverridesParser.create().parse_overrides(overrides)]


def swept_keys(hydra_cfg: DictConfig) -> tuple[str, ...]:
    """The keys a multirun varies: sweep syntax on the command line (`a=1,2`, `range(..)`,
    `interval(..)`) and the sweeper's `params` (Optuna's search space, or the basic
    sweeper's), in order of first appearance."""
    keys = [
        key for key, o in keyed_overrides(list(hydra_cfg.overrides.task)) if o.is_sweep_override()
    ]
    keys += [str(key) for key in (hydra_cfg.sweeper.get("params") or {})]
    return tuple(dict.fromkeys(keys))


@dataclass(frozen=True)
class Job:
    """The multirun job running in this process."""

    sweep: Sweep
    num: int
    values: dict[str, str]  # this job's value of each swept key
    folder: str


def current_job() -> Job | None:
    """This process's multirun job, or None in a single run (or a multirun without a parent)."""
    sweep = Sweep.from_env()
    if sweep is None or not HydraConfig.initialized():
        return None
    hydra_cfg = HydraConfig.get()
    if hydra_cfg.mode != RunMode.MULTIRUN:
        return None
    values = {
        key: o.get_value_element_as_str()
        for key, o in keyed_overrides(list(hydra_cfg.overrides.task))
        if key in sweep.swept
    }
    return Job(sweep, int(hydra_cfg.job.num), values, str(hydra_cfg.runtime.output_dir))


def job_tags(job: Job, run_name: str | None = None) -> dict[str, str]:
    """The tags that make a run this job's child in the MLflow UI and let it be grouped and
    filtered by swept value: `sweep_id`, `sweep_job`, `sweep.<key>`, `mlflow.parentRunId`, and
    `sweep_config`, the swept values but the seed's (the runs of one configuration share it)."""
    configuration = " ".join(f"{k}={v}" for k, v in job.values.items() if k != SEED_KEY)
    tags = {
        "sweep_id": job.sweep.sweep_id,
        "sweep_job": str(job.num),
        "job_dir": job.folder,
        "mlflow.parentRunId": job.sweep.parent_run_id,
        "sweep_config": configuration or ONE_CONFIGURATION,
        **{f"sweep.{key}": value for key, value in job.values.items()},
    }
    if not run_name:
        described = " ".join(f"{key}={value}" for key, value in job.values.items())
        tags["mlflow.runName"] = f"#{job.num} {described}".strip()
    return tags


def sweep_tags(cfg: DictConfig) -> dict[str, str]:
    """`job_tags` of this process's job, or {} outside a multirun."""
    job = current_job()
    if job is None:
        return {}
    target = mlflow_target(cfg)
    return job_tags(job, target.run_name if target else None)


@contextlib.contextmanager
def sweep_job(cfg: DictConfig) -> Iterator[None]:
    """Inside a multirun, a job that raises is logged, recorded as a FAILED MLflow run (with
    its error), and the sweep goes on; outside a multirun errors pass through unchanged."""
    job = current_job()
    if job is None:
        yield
        return
    try:
        yield
    except Exception as error:
        note_failed(job.num, f"{type(error).__name__}: {error}")
        log.exception(
            "Job %d of sweep %s failed (%s); the sweep goes on. Its log: %s",
            job.num,
            job.sweep.sweep_id,
            " ".join(f"{k}={v}" for k, v in job.values.items()),
            job.folder,
        )
        try:
            record_failed_job(cfg, job, error)
        except Exception:  # the record is best effort; the job's own error is what matters
            log.warning("Could not record the failure of job %d in MLflow", job.num, exc_info=True)


def record_failed_job(cfg: DictConfig, job: Job, error: BaseException) -> None:
    """Make sure the failed job has a FAILED child run carrying its error: the run the job
    opened, or a new one when it failed before opening any (bad data, a broken config)."""
    from mlflow import MlflowClient

    from src.tracking.run_logger import record_error

    target = mlflow_target(cfg)
    if target is None:
        return
    client = MlflowClient(tracking_uri=target.tracking_uri)
    experiment = experiment_id(client, target.experiment_name, target.artifact_location)
    found = client.search_runs(
        [experiment],
        filter_string=f"tags.sweep_id = '{job.sweep.sweep_id}' and tags.sweep_job = '{job.num}'",
    )
    if found:
        return  # recorded_run already marked it FAILED with the error
    run = client.create_run(experiment, tags={**job_tags(job), "task": str(cfg.get("task_name"))})
    record_error(client, run.info.run_id, error)
    client.set_terminated(run.info.run_id, "FAILED")


def optimized_value(cfg: DictConfig, metrics: Mapping[str, float]) -> float | None:
    """The value of `cfg.optimized_metric` that a hyperparameter sweeper maximizes; a warning
    naming the available metrics when the run did not produce it."""
    name = cfg.get("optimized_metric")
    if not name:
        return None
    if name not in metrics:
        log.warning(
            "optimized_metric '%s' is not among the run's final metrics: %s",
            name,
            ", ".join(sorted(metrics)),
        )
        return None
    return float(metrics[name])
