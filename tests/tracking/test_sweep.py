"""Hydra multiruns recorded in MLflow: parent and children, failures, Optuna, submitit."""

from __future__ import annotations

import json
import logging
import os
import stat
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from hydra.core.override_parser.overrides_parser import OverridesParser
from omegaconf import OmegaConf

from src.tracking.sweep import Job, Sweep, job_tags, optimized_value, swept_keys
from src.utils.compose import CONFIG_DIR

from .conftest import SIX_JOB_STEPS, SMALL_JOB, SweepStore, sweep


def parent_and_children(store: SweepStore, experiment: str = "arithmetic"):
    runs = store.runs(experiment)
    (parent,) = [run for run in runs if run.data.tags.get("sweep_role") == "parent"]
    children = sorted(
        (run for run in runs if run is not parent), key=lambda run: int(run.data.tags["sweep_job"])
    )
    return parent, children


@pytest.mark.slow
@pytest.mark.xdist_group("six_job_sweep")  # one worker of `pytest -n N` makes the sweep
def test_six_job_sweep_leaves_six_children_and_a_parent(six_job_sweep):
    parent, children = parent_and_children(six_job_sweep)
    sweep_id = parent.data.tags["sweep_id"]
    assert parent.info.status == "FINISHED"
    assert parent.data.tags["sweep_keys"] == "algo.kl_beta,algo.group_size"
    assert (parent.data.tags["jobs"], parent.data.tags["jobs_finished"]) == ("6", "6")
    assert [run.info.status for run in children] == ["FINISHED"] * 6

    # Each child: the sweep's id, its parent, its swept values as tags equal to its params.
    grid = set()
    for run in children:
        tags, params = run.data.tags, run.data.params
        assert tags["sweep_id"] == sweep_id
        assert tags["mlflow.parentRunId"] == parent.info.run_id
        assert tags["sweep.algo.kl_beta"] == params["algo.kl_beta"]
        assert tags["sweep.algo.group_size"] == params["algo.group_size"]
        assert run.info.run_name.startswith(f"#{tags['sweep_job']} algo.kl_beta=")
        grid.add((tags["sweep.algo.kl_beta"], tags["sweep.algo.group_size"]))
        steps = [
            m.step for m in six_job_sweep.client().get_metric_history(run.info.run_id, "reward")
        ]
        assert steps == SIX_JOB_STEPS
    assert grid == {(kl, g) for kl in ("0.0", "0.05", "0.1") for g in ("2", "4")}

    # The parent lists its children and names the best by eval/accuracy.
    client = six_job_sweep.client()
    listed = json.loads(
        Path(client.download_artifacts(parent.info.run_id, "children.json")).read_text()
    )
    assert [row["run_id"] for row in listed] == [run.info.run_id for run in children]
    assert_best_is_the_highest(parent, children)
    # One folder per job under the sweep folder, named by the parent.
    sweep_dir = Path(parent.data.tags["sweep_dir"])
    assert sorted(p.name for p in sweep_dir.iterdir() if p.is_dir()) == [str(n) for n in range(6)]
    print(f"six-job sweep took {six_job_sweep.seconds:.1f} s")


def data_files(folder: Path) -> tuple[Path, Path]:
    """A good JSONL file of sums and one whose second line is broken."""
    good, bad = folder / "good.jsonl", folder / "bad.jsonl"
    rows = [{"question": f"What is {a} + 2?", "answer": str(a + 2)} for a in range(12)]
    good.write_text("".join(json.dumps(row) + "\n" for row in rows))
    bad.write_text(json.dumps(rows[0]) + "\n{not json\n")
    return good, bad


SMALL_FILE_JOB = ["data.val_size=4", *[a for a in SMALL_JOB if not a.startswith("data.val_size")]]


@pytest.mark.slow
def test_a_failing_job_leaves_the_jobs_after_it_finished(tmp_path):
    """Three jobs, one after another; the middle one fails before opening its run (a malformed
    data file). The third still runs, and the failure is a FAILED child run with its error."""
    good, bad = data_files(tmp_path)
    store = sweep(tmp_path / "outputs", f"data.path={good},{bad},{good}", *SMALL_FILE_JOB, status=1)
    parent, children = parent_and_children(store)
    assert [run.info.status for run in children] == ["FINISHED", "FAILED", "FINISHED"]
    failed = children[1]
    assert Path(failed.data.tags["sweep.data.path"]).name == "bad.jsonl"
    assert failed.data.tags["error"].startswith("DataFileError: ")
    assert "bad.jsonl:2" in failed.data.tags["error"]
    assert failed.data.tags["mlflow.parentRunId"] == parent.info.run_id
    traceback = store.client().download_artifacts(failed.info.run_id, "error.txt")
    assert "DataFileError" in Path(traceback).read_text()
    assert "error" not in children[2].data.tags
    assert parent.info.status == "FINISHED"
    assert (parent.data.tags["jobs_finished"], parent.data.tags["jobs_failed"]) == ("2", "1")
    assert "1 job(s) of the sweep failed: job 1: DataFileError" in store.log
    last = store.log.strip().splitlines()[-1]
    assert last.startswith("error: 1 job(s) of the sweep failed (job 1: DataFileError: ")


@pytest.mark.slow
def test_a_failing_job_leaves_the_other_finished_with_submitit_local(tmp_path):
    """Two jobs through the local submitit launcher (one process each); one fails (a malformed
    data file, which no check before the sweep sees) and is recorded as such, and the command
    exits with status 1 (the jobs' failures read from the parent run)."""
    good, bad = data_files(tmp_path)
    store = sweep(
        tmp_path / "outputs",
        "hydra/launcher=submitit_local",
        f"data.path={good},{bad}",
        *SMALL_FILE_JOB,
        status=1,
    )
    parent, children = parent_and_children(store)
    assert parent.data.tags["launcher"].endswith("LocalLauncher")
    by_file = {Path(run.data.tags["sweep.data.path"]).name: run for run in children}
    assert by_file["good.jsonl"].info.status == "FINISHED"
    failed = by_file["bad.jsonl"]
    assert failed.info.status == "FAILED"
    assert failed.data.tags["error"].startswith("DataFileError: ")
    assert "error: 1 job(s) of the sweep failed (job 1: DataFileError: " in store.log
    assert (parent.data.tags["jobs_finished"], parent.data.tags["jobs_failed"]) == ("1", "1")


def assert_best_is_the_highest(parent, children) -> None:
    """The parent names the child with the highest final eval/accuracy, and that value; the
    children differ, so that the lowest or any other child would not pass for it."""
    accuracy = {run.info.run_id: run.data.metrics["eval/accuracy"] for run in children}
    assert len(set(accuracy.values())) > 1, accuracy
    highest = max(accuracy.values())
    print("final eval/accuracy of the children:", sorted(accuracy.values()))
    assert accuracy[parent.data.tags["best_run_id"]] == highest, accuracy
    assert parent.data.metrics["best/eval/accuracy"] == highest


@pytest.mark.slow
def test_optuna_search_maximizes_eval_accuracy(tmp_path, warm_tiny):
    store = sweep(
        tmp_path,
        "hparams_search=optuna",
        "hydra.sweeper.n_trials=3",
        "hydra.sweeper.sampler.n_startup_trials=2",
        # One learning rate too small to change the warm model in 3 steps and one large enough
        # to wreck it on any CPU, so the trials' held-out accuracies differ (the seeded sampler
        # proposes both among the 3 trials).
        "hydra.sweeper.params={algo.optimizer.lr:'choice(1e-6, 3e-2)'}",
        *warm_tiny,
        "trainer.max_steps=3",
        "trainer.val_check_interval=3",
        "data.val_size=64",
        "algo.max_completion_length=8",
        *[arg for arg in SMALL_JOB if arg.startswith(("trainer.enable", "data.batch"))],
    )
    parent, children = parent_and_children(store)
    assert parent.data.tags["sweeper"].endswith("OptunaSweeper")
    assert parent.data.tags["sweep_keys"] == (
        "algo.optimizer.lr,algo.kl_beta,algo.group_size,algo.epsilon_high"
    )
    assert [run.info.status for run in children] == ["FINISHED"] * 3
    for run in children:  # the trial's values are its params and its tags
        assert float(run.data.params["algo.optimizer.lr"]) in (1e-6, 3e-2)
        assert run.data.params["algo.group_size"] in ("4", "8")
        assert run.data.tags["sweep.algo.kl_beta"] == run.data.params["algo.kl_beta"]
    assert_best_is_the_highest(parent, children)
    results = store.client().download_artifacts(parent.info.run_id, "optimization_results.yaml")
    best = max(run.data.metrics["eval/accuracy"] for run in children)
    assert OmegaConf.load(results).best_value == best  # Optuna itself maximized


def test_optuna_preset_maximizes_over_the_documented_space():
    with initialize_config_dir(version_base="1.3", config_dir=str(CONFIG_DIR)):
        cfg = compose("train", ["hparams_search=optuna"], return_hydra_config=True)
    sweeper = cfg.hydra.sweeper
    assert (sweeper.direction, cfg.optimized_metric) == ("maximize", "eval/accuracy")
    assert dict(sweeper.params) == {
        "algo.optimizer.lr": "tag(log, interval(1e-6, 1e-4))",
        "algo.kl_beta": "interval(0.0, 0.1)",
        "algo.group_size": "choice(4, 8)",
        "algo.epsilon_high": "choice(0.2, 0.28)",
    }


def test_slurm_launcher_renders_an_sbatch_script(tmp_path, monkeypatch):
    """`hydra/launcher=slurm` (our preset over the plugin's `submitit_slurm`) composes, and
    submitit turns it into an sbatch script asking for one GPU, 4 hours and a warning signal
    before the limit. A stand-in `srun` lets submitit believe it is on a cluster."""
    with initialize_config_dir(version_base="1.3", config_dir=str(CONFIG_DIR)):
        ours, plugins = (
            compose("train", [f"hydra/launcher={name}"], return_hydra_config=True).hydra.launcher
            for name in ("slurm", "submitit_slurm")
        )
    assert ours._target_ == plugins._target_
    assert ours._target_.endswith("submitit_launcher.SlurmLauncher")
    launcher = ours

    srun = tmp_path / "bin" / "srun"
    srun.parent.mkdir()
    srun.write_text("#!/bin/sh\nexit 0\n")
    srun.chmod(srun.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{srun.parent}{os.pathsep}{os.environ['PATH']}")
    import submitit
    from hydra_plugins.hydra_submitit_launcher.config import BaseQueueConf

    params = {k: v for k, v in OmegaConf.to_container(launcher).items() if k != "_target_"}
    params["name"] = "train"
    executor = submitit.AutoExecutor(
        folder=tmp_path / "submitit",
        cluster="slurm",
        slurm_max_num_timeout=params["max_num_timeout"],
    )
    base = set(OmegaConf.structured(BaseQueueConf).keys())
    executor.update_parameters(
        **{
            (k if k in base else f"slurm_{k}"): v
            for k, v in params.items()
            if k not in ("submitit_folder", "max_num_timeout")
        }
    )
    script = executor._executor._make_submission_file_text("python -m x", "uid")
    for line in ("--gpus-per-node=1", "--time=240", "--cpus-per-task=8", "--signal=USR2@120"):
        assert f"#SBATCH {line}" in script


def test_swept_keys_come_from_sweep_syntax_and_sweeper_params():
    hydra_cfg = OmegaConf.create(
        {
            "overrides": {"task": ["model=tiny", "algo.kl_beta=0.0,0.1", "seed=range(3)"]},
            "sweeper": {"params": {"algo.optimizer.lr": "interval(1e-6, 1e-4)", "seed": "1,2"}},
        }
    )
    assert swept_keys(hydra_cfg) == ("algo.kl_beta", "seed", "algo.optimizer.lr")


def test_job_tags_name_the_run_after_its_swept_values():
    job = Job(Sweep("s-1", "parent-id", ("algo.kl_beta",)), 3, {"algo.kl_beta": "0.1"}, "/d/3")
    tags = job_tags(job)
    assert tags["mlflow.runName"] == "#3 algo.kl_beta=0.1"
    assert tags["mlflow.parentRunId"] == "parent-id"
    assert tags["sweep.algo.kl_beta"] == "0.1" and tags["sweep_job"] == "3"
    assert "mlflow.runName" not in job_tags(job, run_name="mine")
    parsed = OverridesParser.create().parse_overrides(["algo.kl_beta=0.1"])[0]
    assert parsed.get_value_element_as_str() == tags["sweep.algo.kl_beta"]


def test_optimized_value_warns_when_the_metric_is_missing(caplog):
    cfg = OmegaConf.create({"optimized_metric": "eval/accuracy"})
    assert optimized_value(cfg, {"eval/accuracy": 0.25}) == 0.25
    with caplog.at_level(logging.WARNING):
        assert optimized_value(cfg, {"reward": 1.0}) is None
    assert "'eval/accuracy' is not among the run's final metrics: reward" in caplog.text
