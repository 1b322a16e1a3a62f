"""The Hydra callback that gives every multirun a parent MLflow run listing its jobs.

Configured in `conf/hydra/default.yaml`, so `python -m src.train -m a=1,2 b=x,y` records one
parent run (tag `sweep_role=parent`) and one child run per job, whatever the sweeper (basic,
Optuna) or launcher (basic, submitit local or SLURM).
"""

from __future__ import annotations

import atexit
import logging
import os
import secrets
import signal
from pathlib import Path
from typing import Any

from hydra.experimental.callback import Callback
from omegaconf import DictConfig

from src.tracking.store import experiment_id
from src.tracking.sweep import (
    SWEEP_ENV,
    Sweep,
    mlflow_target,
    note_failed,
    sweep_children,
    swept_keys,
)
from src.utils.config import plain
from src.utils.stopping import Stopped

log = logging.getLogger(__name__)

OPTUNA_RESULTS = "optimization_results.yaml"  # what the Optuna sweeper writes into the sweep folder


class MlflowSweepCallback(Callback):
    """Opens the sweep's parent run before the first job and, after the last, lists the jobs'
    runs in it (`children.json`, tags `jobs_*`, `best_run_id`, metric `best/<metric>`).

    A job left RUNNING (its process was killed) is marked FAILED. If the sweep itself ends
    early, the parent is closed at interpreter exit, its children listed: KILLED when a signal
    stopped it (SIGTERM, Ctrl-C: the job running then is KILLED too), FAILED otherwise. Failed
    jobs are logged at the end as errors and noted (`note_failed`), so that the command exits
    with status 1 (`src.runs.cli.run_cli`): Hydra does not let a callback change it.
    """

    def __init__(self) -> None:
        self._state: dict[str, Any] | None = None
        self._signal: int | None = None  # the signal that stopped the sweep, if one did
        self._previous: dict[int, Any] = {}

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        from mlflow import MlflowClient

        target = mlflow_target(config)
        if target is None:
            log.info("No MLflow logger configured: the sweep has no parent run")
            return
        client = MlflowClient(tracking_uri=target.tracking_uri)
        experiment = experiment_id(client, target.experiment_name, target.artifact_location)
        hydra_cfg = config.hydra
        sweep_dir = Path(str(hydra_cfg.sweep.dir))
        sweep_id = f"{sweep_dir.name}-{secrets.token_hex(2)}"
        swept = swept_keys(hydra_cfg)
        run = client.create_run(
            experiment,
            run_name=f"sweep {sweep_id}",
            tags={
                "sweep_id": sweep_id,
                "sweep_role": "parent",
                "sweep_dir": str(sweep_dir),
                "sweep_keys": ",".join(swept),
                "sweeper": str(hydra_cfg.sweeper.get("_target_", "")),
                "launcher": str(hydra_cfg.launcher.get("_target_", "")),
                "task": str(config.get("task_name", "")),
            },
        )
        parent = run.info.run_id
        client.log_dict(
            parent,
            {
                "overrides": list(hydra_cfg.overrides.task),
                "swept": list(swept),
                "sweeper": plain(hydra_cfg.sweeper),
                "launcher": plain(hydra_cfg.launcher),
            },
            "sweep.yaml",
        )
        os.environ[SWEEP_ENV] = Sweep(sweep_id, parent, swept).to_env()
        direction = hydra_cfg.sweeper.get("direction") or "maximize"
        self._state = {
            "tracking_uri": target.tracking_uri,
            "experiment": experiment,
            "parent": parent,
            "sweep_id": sweep_id,
            "sweep_dir": str(sweep_dir),
            "metric": config.get("optimized_metric"),
            "minimize": str(direction).lower() == "minimize",
        }
        atexit.register(self._close_after_crash)
        self._catch_signals()
        log.info(
            "Sweep %s: parent MLflow run %s in experiment '%s'; swept: %s",
            sweep_id,
            parent,
            target.experiment_name,
            ", ".join(swept) or "nothing",
        )

    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        failed = self._close(aborted=False)
        for row in failed:
            note_failed(int(row["job"]), str(row["error"] or row["status"]))
        if failed:
            log.error(
                "%d job(s) of the sweep failed: %s. The other jobs finished; each failed "
                "job's run carries its error (tag `error`, artifact error.txt) and its log is in "
                "its job folder.",
                len(failed),
                "; ".join(f"job {row['job']}: {row['error']}" for row in failed),
            )

    def _catch_signals(self) -> None:
        """SIGTERM and Ctrl-C stop the sweep as `Stopped` (SIGTERM's default would end the
        process without the interpreter's exit, leaving the parent RUNNING), and the signal is
        noted. A job's own handlers (a checkpoint after the step) take over while it trains
        and give these back after; a stop they make is seen in its KILLED run."""

        def stop(signum: int, frame: Any) -> None:
            self._signal = signum
            raise Stopped(f"{signal.Signals(signum).name}: the sweep was stopped", signum)

        for signum in (signal.SIGTERM, signal.SIGINT):
            try:
                self._previous[signum] = signal.signal(signum, stop)
            except ValueError:  # not the main thread: the launcher's own handling stays
                self._previous.pop(signum, None)

    def _restore_signals(self) -> None:
        for signum, handler in self._previous.items():
            signal.signal(signum, handler)
        self._previous = {}

    def _close_after_crash(self) -> None:
        """At interpreter exit: the sweep ended without `on_multirun_end`."""
        if self._state is not None:
            log.error("The sweep stopped before its end; closing its parent run")
            self._close(aborted=True)

    def _close(self, aborted: bool) -> list[dict[str, Any]]:
        """List the children in the parent run, close it, and return the failed children."""
        from mlflow import MlflowClient

        state, self._state = self._state, None
        if state is None:
            return []
        atexit.unregister(self._close_after_crash)
        self._restore_signals()
        os.environ.pop(SWEEP_ENV, None)
        client = MlflowClient(tracking_uri=state["tracking_uri"])
        rows = [
            self._child_row(client, run, state["metric"])
            for run in sweep_children(client, state["experiment"], state["sweep_id"])
        ]
        rows.sort(key=lambda row: (row["job"], row["run_name"]))
        parent = state["parent"]
        client.log_dict(parent, rows, "children.json")
        failed = [row for row in rows if row["status"] != "FINISHED"]
        client.set_tag(parent, "jobs", str(len(rows)))
        client.set_tag(parent, "jobs_finished", str(len(rows) - len(failed)))
        client.set_tag(parent, "jobs_failed", str(len(failed)))
        scored = [row for row in rows if row["status"] == "FINISHED" and row["metric"] is not None]
        if scored:
            pick = min if state["minimize"] else max
            best = pick(scored, key=lambda row: row["metric"])
            client.set_tag(parent, "best_run_id", best["run_id"])
            client.log_metric(parent, f"best/{state['metric']}", best["metric"])
        optuna_results = Path(state["sweep_dir"]) / OPTUNA_RESULTS
        if optuna_results.exists():
            client.log_artifact(parent, str(optuna_results))
        stopped = self._signal is not None or any(row["status"] == "KILLED" for row in rows)
        client.set_terminated(
            parent, ("KILLED" if stopped else "FAILED") if aborted else "FINISHED"
        )
        self._log_summary(state, rows)
        return failed

    @staticmethod
    def _child_row(client: Any, run: Any, metric: str | None) -> dict[str, Any]:
        """One job's line in `children.json`; a child still RUNNING is dead and marked FAILED."""
        tags = run.data.tags
        status = run.info.status
        if status == "RUNNING":
            client.set_tag(run.info.run_id, "error", "the job ended without closing its run")
            client.set_terminated(run.info.run_id, "FAILED")
            status = "FAILED"
        return {
            "job": int(tags.get("sweep_job", -1)),
            "run_id": run.info.run_id,
            "run_name": run.info.run_name or "",
            "status": status,
            "values": {
                k.removeprefix("sweep."): v for k, v in tags.items() if k.startswith("sweep.")
            },
            "metric": run.data.metrics.get(metric) if metric else None,
            "error": tags.get("error", "the job ended without closing its run")
            if status != "FINISHED"
            else None,
        }

    @staticmethod
    def _log_summary(state: dict[str, Any], rows: list[dict[str, Any]]) -> None:
        """One log line per job: the table a researcher looks for when the sweep ends."""
        log.info("Sweep %s: %d runs", state["sweep_id"], len(rows))
        for row in rows:
            values = " ".join(f"{k}={v}" for k, v in row["values"].items())
            score = "" if row["metric"] is None else f" {state['metric']}={row['metric']:.4g}"
            log.info("  job %s %-8s %s%s", row["job"], row["status"], values, score)
