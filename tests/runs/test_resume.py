"""A run killed with SIGKILL and continued with `ckpt_path=last` ends where an uninterrupted
run of the same seed ends: same weights and optimizer state, same MLflow run, every metric
step written once with the same value; with the per-machine kernel choices on, while the
machine is busy: the continuation takes the choices its checkpoint recorded."""

from __future__ import annotations

import json
import subprocess
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import mlflow
import pytest
import torch

from tests.helpers.compare import (
    assert_same_histories,
    assert_updates_were_not_trivial,
    checkpoint_weights,
    histories,
    max_difference,
    weights,
)
from tests.helpers.mlflow_runs import runs_in
from tests.helpers.signal_at_step import signal_at
from tests.helpers.training_process import TINY_RUN, start_training

STEPS = 10
KILLED_AT = 5  # after the checkpoint of step 3, before the one of step 6
RUN = [
    *TINY_RUN, "algo.kl_beta=0.05",
    "algo.samples_every_n_steps=3", f"trainer.max_steps={STEPS}",
    "trainer.val_check_interval=4", "callbacks.checkpoint.every_n_train_steps=3",
]  # fmt: skip


def train(root: Path, run: str, *overrides: str, choices: Path | None = None) -> subprocess.Popen:
    """Start a training process writing its store under `root` and its folder at root/run,
    one thread, its kernels chosen per machine (or as the JSON file `choices` pins them)."""
    return start_training(
        *RUN,
        f"paths.output_root={root}",
        f"paths.run_dir={root / run}",
        *overrides,
        one_thread=True,
        kernels_chosen=True,
        environment={"GRPO_MACHINE_CHOICES": str(choices)} if choices else None,
    )


@contextmanager
def busy_machine() -> Iterator[None]:
    """A thread of this process kept busy: the machine is loaded, as a user's often is, so a
    timed choice is not kept for the machine and each process would time it for itself."""
    done = threading.Event()

    def spin() -> None:
        while not done.is_set():
            sum(range(10_000))

    thread = threading.Thread(target=spin, daemon=True)
    thread.start()
    try:
        yield
    finally:
        done.set()
        thread.join()


def finish(process: subprocess.Popen) -> str:
    output, _ = process.communicate(timeout=300)
    assert process.returncode == 0, output[-3000:]
    return output


def only_run(root: Path) -> tuple[mlflow.MlflowClient, mlflow.entities.Run]:
    uri = f"sqlite:///{root}/mlflow.db"
    (run,) = runs_in(uri, "arithmetic")
    return mlflow.MlflowClient(tracking_uri=uri), run


def checkpoint(path: Path) -> dict:
    return torch.load(path, map_location="cpu", weights_only=True)


def optimizer_tensors(saved: dict) -> list[torch.Tensor]:
    """Every tensor of the optimizer's state (Adam's moments), in parameter order."""
    (state,) = saved["optimizer_states"]
    return [
        value
        for index in sorted(state["state"])
        for _, value in sorted(state["state"][index].items())
        if torch.is_tensor(value) and value.numel() > 1
    ]


@pytest.mark.slow
def test_a_killed_run_continued_with_ckpt_path_last_matches_an_uninterrupted_one(tmp_path):
    root = tmp_path / "killed"
    with busy_machine():
        process = train(root, "first", *signal_at(KILLED_AT, "SIGKILL"))
        output, _ = process.communicate(timeout=300)
        assert process.returncode == -9, output[-3000:]
        assert "per-machine choice" in output  # the kernels were chosen, not turned off
        client, killed = only_run(root)
        assert killed.info.status == "RUNNING"  # SIGKILL leaves no chance to close the run
        assert [step for step, _ in histories(client, killed)["loss"]] == list(
            range(1, KILLED_AT + 1)
        )
        saved = checkpoint(root / "first" / "checkpoints" / "last.ckpt")
        saved_at = saved["global_step"]
        assert saved_at == 3 and saved["machine_choices"]
        # The uninterrupted run takes the killed run's choices from a file; the continuation
        # from its checkpoint, by itself. They go side by side, one thread each.
        chosen = tmp_path / "choices.json"
        chosen.write_text(json.dumps(saved["machine_choices"]))
        uninterrupted = train(tmp_path / "straight", "run", choices=chosen)
        output = finish(train(root, "second", "ckpt_path=last"))
        finish(uninterrupted)
    client, straight = only_run(tmp_path / "straight")
    expected = histories(client, straight)
    assert_updates_were_not_trivial(expected)  # the comparisons below could fail
    assert f"Continuing from step {saved_at} of " in output
    assert "as the run continued chose (last.ckpt, step 3)" in output

    client, resumed = only_run(root)  # still one run: the continuation wrote into it
    assert resumed.info.run_id == killed.info.run_id
    assert resumed.info.status == "FINISHED"
    assert resumed.data.tags["resumes"] == "1"
    assert resumed.data.tags["resumed_from_step"] == str(saved_at)
    got = histories(client, resumed)
    assert_same_histories(got, expected)

    # The final weights (saved at step 10) and the last checkpoint (step 9: every 3 steps),
    # which the continuation wrote beside the one it started from, weights and Adam's moments.
    final = weights(root / "second" / "model")
    reference = weights(tmp_path / "straight" / "run" / "model")
    moved = max_difference(reference, weights(models(tmp_path / "straight")))
    last = checkpoint(root / "first" / "checkpoints" / "last.ckpt")
    last_reference = checkpoint(tmp_path / "straight" / "run" / "checkpoints" / "last.ckpt")
    assert last["global_step"] == last_reference["global_step"] == 9
    differences = {
        "final weights": max_difference(final, reference),
        "weights at step 9": max_difference(
            checkpoint_weights(last), checkpoint_weights(last_reference)
        ),
        "optimizer state at step 9": max(
            (a - b).abs().max().item()
            for a, b in zip(optimizer_tensors(last), optimizer_tensors(last_reference), strict=True)
        ),
    }
    print(
        f"killed after step {KILLED_AT} (checkpoint of step {saved_at}), continued to step "
        f"{STEPS}: weights moved up to {moved:.3g} from the start; largest difference from the "
        "uninterrupted run: " + ", ".join(f"{k} {v:.3g}" for k, v in differences.items())
    )
    assert moved > 2e-4  # the weights compared did change (Adam, lr 1e-4 decaying to 0)
    assert max(differences.values()) < 1e-7, differences


def models(root: Path) -> Path:
    """The tiny model folder a run under `root` built and started from."""
    return root / "models" / "tiny_llama_h128_l4"
