"""Every run and every sweep gets a folder of its own, even when started in the same second,
and the jobs of a sweep share the sweep's; logs sent to a pipe carry no colour codes."""

from __future__ import annotations

import re
from pathlib import Path

import mlflow
import pytest
from omegaconf import OmegaConf

from src.utils.compose import compose_config
from tests.helpers.training_process import start_training

# date_time_token, e.g. 2025-01-31_14-05-09_3fa9c2
FOLDER = re.compile(r"\d{4}-\d\d-\d\d_\d\d-\d\d-\d\d_[0-9a-f]{6}")
FAILS_AT_ONCE = "trainer.max_steps=0"  # refused before data or models load, after Hydra's folder
# settings that each pass alone (so a sweep over other keys starts) and fail together at each
# job's settings check, before data or models load
JOBS_FAIL_AT_ONCE = ("model.load_in_4bit=true",)


def test_each_config_gets_its_own_run_folder_and_keeps_it(tmp_path):
    first, second = (compose_config([f"paths.output_root={tmp_path}"]) for _ in range(2))
    folder = OmegaConf.select(first, "hydra.run.dir")
    assert OmegaConf.select(first, "hydra.run.dir") == folder  # resolved again: the same
    assert Path(folder).parent == tmp_path / "runs" / "arithmetic"
    assert FOLDER.fullmatch(Path(folder).name), folder
    assert OmegaConf.select(second, "hydra.run.dir") != folder
    # Hydra copies the sweep's resolver cache into each job's config (load_sweep_config):
    # every job then names the sweep folder the sweep itself created.
    sweep_dir = OmegaConf.select(first, "hydra.sweep.dir")
    assert FOLDER.fullmatch(Path(sweep_dir).name), sweep_dir
    OmegaConf.copy_cache(from_config=first, to_config=second)
    assert OmegaConf.select(second, "hydra.sweep.dir") == sweep_dir


@pytest.mark.slow
def test_runs_started_at_once_and_a_sweep_get_folders_of_their_own(tmp_path):
    """Two runs and a two-job sweep started together (each stops at its settings check, after
    Hydra made its folder), all output sent to pipes. The sweep's values each pass the check
    made before its first job; 4-bit weights without LoRA fail each job's own check."""
    runs = [start_training(FAILS_AT_ONCE, f"paths.output_root={tmp_path}") for _ in range(2)]
    sweep = start_training(
        "-m", *JOBS_FAIL_AT_ONCE, "algo.kl_beta=0.0,0.01", f"paths.output_root={tmp_path}"
    )
    outputs = [process.communicate(timeout=300)[0] for process in [*runs, sweep]]
    for process, output in zip(runs, outputs, strict=False):
        assert process.returncode == 1, output[-3000:]
        assert "trainer.max_steps must be a whole number >= 1" in output

    folders = sorted((tmp_path / "runs" / "arithmetic").iterdir())
    assert len(folders) == 2, folders
    for folder in folders:
        assert FOLDER.fullmatch(folder.name), folder
        overrides = (folder / ".hydra" / "overrides.yaml").read_text().splitlines()
        assert f"- {FAILS_AT_ONCE}" in overrides  # one run's folder, not the sweep's
        assert "- algo.kl_beta=0.01" not in overrides
        assert (folder / "train.log").is_file()

    (sweep_dir,) = (tmp_path / "multiruns" / "arithmetic").iterdir()
    assert FOLDER.fullmatch(sweep_dir.name), sweep_dir
    assert sorted(p.name for p in sweep_dir.iterdir() if p.is_dir()) == ["0", "1"]
    for job in ("0", "1"):
        assert (sweep_dir / job / ".hydra" / "config.yaml").is_file()
    client = mlflow.MlflowClient(tracking_uri=f"sqlite:///{tmp_path}/mlflow.db")
    experiment = client.get_experiment_by_name("arithmetic").experiment_id
    (parent,) = client.search_runs([experiment], "tags.sweep_role = 'parent'")
    assert parent.data.tags["sweep_dir"] == str(sweep_dir)  # the sweep and its jobs agree

    # Hydra's and the jobs' log lines reached the pipe, without terminal colour codes.
    sweep_output = outputs[-1]
    assert sweep.returncode == 1 and "error: 2 job(s) of the sweep failed" in sweep_output
    assert "][HYDRA] Sweep " in sweep_output
    assert "[src.tracking.sweep][ERROR] - Job 0 of sweep" in sweep_output
    assert not [output for output in outputs if "\x1b[" in output]
