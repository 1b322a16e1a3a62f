"""`hydra/launcher=slurm_multinode`: the sbatch script submitit would submit for a run over two
nodes of four GPUs, rendered from the real config without submitting anything."""

from __future__ import annotations

import os
import shlex
import stat

import pytest
import submitit
from hydra_plugins.hydra_submitit_launcher.config import BaseQueueConf
from omegaconf import OmegaConf

from src.utils.compose import compose_config

TWO_NODES = [
    "hydra/launcher=slurm_multinode",
    "hardware=[multi_gpu,lora]",
    "trainer.num_nodes=2",
    "trainer.devices=4",
]


@pytest.fixture(autouse=True)
def stand_in_srun(tmp_path, monkeypatch):
    """submitit's SLURM executor refuses to start where `srun` is missing: give it one that
    does nothing (it is never called; nothing is submitted)."""
    srun = tmp_path / "bin" / "srun"
    srun.parent.mkdir()
    srun.write_text("#!/bin/sh\nexit 1\n")
    srun.chmod(srun.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{srun.parent}{os.pathsep}{os.environ['PATH']}")


def sbatch_script(overrides: list[str], folder: str) -> str:
    """The script hydra-submitit-launcher 1.2 has submitit 1.5 write for these overrides: its
    `launch` maps the launcher config onto an `AutoExecutor` exactly this way (init keys,
    `slurm_` prefixes) before `map_array`, which renders the parameters with `sbatch`'s
    `_make_sbatch_string` and submits; here the text is only rendered."""
    cfg = compose_config(overrides)
    params = OmegaConf.to_container(cfg.hydra.launcher, resolve=True)
    assert params.pop("_target_").endswith("submitit_launcher.SlurmLauncher")
    executor = submitit.AutoExecutor(
        folder=folder, cluster="slurm", slurm_max_num_timeout=params.pop("max_num_timeout")
    )
    params.pop("submitit_folder")
    base = set(OmegaConf.structured(BaseQueueConf).keys())
    executor.update_parameters(**{k if k in base else f"slurm_{k}": v for k, v in params.items()})
    slurm = executor._executor
    return slurm._make_submission_file_text(slurm._submitit_command_str, "uid")


def test_two_nodes_of_four_gpus_run_one_process_per_gpu(tmp_path):
    script = sbatch_script(TWO_NODES, str(tmp_path / "submitit"))
    flags = {line for line in script.splitlines() if line.startswith("#SBATCH ")}
    for flag in ("--nodes=2", "--ntasks-per-node=4", "--gpus-per-node=4", "--cpus-per-task=8"):
        assert f"#SBATCH {flag}" in flags, script
    # inherited from hydra/launcher=slurm: the time limit and the warning before it
    assert {"#SBATCH --time=240", "#SBATCH --signal=USR2@120"} <= flags
    # srun starts nodes x tasks-per-node = 8 copies of the job, one per GPU; Lightning's
    # SLURMEnvironment reads each one's rank from the variables srun sets
    (srun,) = [line for line in script.splitlines() if line.startswith("srun ")]
    words = shlex.split(srun)
    assert words[:2] == ["srun", "--unbuffered"]
    assert words[-3:-1] == ["-m", "submitit.core._submit"] and words[-1] == str(
        tmp_path / "submitit"
    )
    assert not any(word.startswith(("--ntasks", "--nodes")) for word in words)  # the allocation's


def test_the_shape_follows_the_trainer(tmp_path):
    script = sbatch_script(
        [*TWO_NODES[:2], "trainer.num_nodes=3", "trainer.devices=8"], str(tmp_path / "submitit")
    )
    for flag in ("--nodes=3", "--ntasks-per-node=8", "--gpus-per-node=8"):
        assert f"#SBATCH {flag}\n" in script


def test_one_gpu_jobs_keep_their_shape(tmp_path):
    script = sbatch_script(
        ["hydra/launcher=slurm", "hardware=[gpu,lora]"], str(tmp_path / "submitit")
    )
    for flag in ("--nodes=1", "--ntasks-per-node=1", "--gpus-per-node=1"):
        assert f"#SBATCH {flag}\n" in script
