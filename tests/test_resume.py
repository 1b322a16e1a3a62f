"""A run killed with SIGKILL and continued with `ckpt_path=last` ends where an uninterrupted
run of the same seed ends: same weights, same MLflow run, every metric step written once."""

from __future__ import annotations

import signal
import subprocess
from pathlib import Path

import mlflow
import pytest
import torch

from tests.training_process import TINY_RUN, start_training, wait_for_steps

STEPS = 10
RUN = [
    *TINY_RUN, "algo.kl_beta=0.05",
    "algo.samples_every_n_steps=3", f"trainer.max_steps={STEPS}",
    "trainer.val_check_interval=4", "callbacks.checkpoint.every_n_train_steps=3",
]  # fmt: skip
TIMED = {"step_time"}  # wall-clock figures differ between any two runs


def train(root: Path, run: str, *overrides: str) -> subprocess.Popen:
    """Start a training process writing its store under `root` and its folder at root/run."""
    return start_training(
        *RUN, f"paths.output_root={root}", f"paths.run_dir={root / run}", *overrides
    )


def finish(process: subprocess.Popen) -> str:
    output, _ = process.communicate(timeout=300)
    assert process.returncode == 0, output[-3000:]
    return output


def only_run(root: Path) -> tuple[mlflow.MlflowClient, mlflow.entities.Run]:
    client = mlflow.MlflowClient(tracking_uri=f"sqlite:///{root}/mlflow.db")
    (run,) = client.search_runs([client.get_experiment_by_name("arithmetic").experiment_id])
    return client, run


def histories(client: mlflow.MlflowClient, run) -> dict[str, list[tuple[int, float]]]:
    """Every metric's (step, value) pairs in step order, duplicates kept."""
    return {
        key: sorted((m.step, m.value) for m in client.get_metric_history(run.info.run_id, key))
        for key in run.data.metrics
    }


def weights(path: Path) -> dict[str, torch.Tensor]:
    return torch.load(path, map_location="cpu", weights_only=True)["state_dict"]


@pytest.mark.slow
def test_a_killed_run_continued_with_ckpt_path_last_matches_an_uninterrupted_one(tmp_path):
    finish(train(tmp_path / "straight", "run"))
    client, straight = only_run(tmp_path / "straight")
    expected = histories(client, straight)

    root = tmp_path / "killed"
    process = train(root, "first")
    wait_for_steps(process, root / "mlflow.db", 5)  # past the checkpoint of step 3
    process.send_signal(signal.SIGKILL)
    process.communicate(timeout=60)
    client, killed = only_run(root)
    assert killed.info.status == "RUNNING"  # SIGKILL leaves no chance to close the run
    before = histories(client, killed)["loss"]
    saved_at = torch.load(root / "first" / "checkpoints" / "last.ckpt", weights_only=True)
    assert 3 <= saved_at["global_step"] < before[-1][0] < STEPS

    output = finish(train(root, "second", "ckpt_path=last"))
    assert f"Continuing from step {saved_at['global_step']} of " in output
    client, resumed = only_run(root)  # still one run: the continuation wrote into it
    assert resumed.info.run_id == killed.info.run_id
    assert resumed.info.status == "FINISHED"
    assert resumed.data.tags["resumes"] == "1"
    assert resumed.data.tags["resumed_from_step"] == str(saved_at["global_step"])
    got = histories(client, resumed)
    assert got.keys() == expected.keys()
    for key, values in expected.items():
        assert [step for step, _ in got[key]] == [step for step, _ in values], key
        if key not in TIMED:
            assert [value for _, value in got[key]] == pytest.approx(
                [value for _, value in values], rel=1e-5, abs=1e-6
            ), key

    # The continuation wrote its checkpoints beside the one it started from.
    final = weights(root / "first" / "checkpoints" / "last.ckpt")
    reference = weights(tmp_path / "straight" / "run" / "checkpoints" / "last.ckpt")
    difference = max((final[name] - reference[name]).abs().max().item() for name in reference)
    print(
        f"killed after step {before[-1][0]} (checkpoint of step {saved_at['global_step']}), "
        f"continued to step {STEPS}: max weight difference {difference:.3g}"
    )
    assert difference < 1e-5
