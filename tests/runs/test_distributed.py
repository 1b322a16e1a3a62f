"""GRPO on two processes (Lightning DDP over gloo, on the CPU) equals GRPO on one process
given the same global batch and seed: every logged figure, step by step, for the `grpo` and
`dapo` losses (the latter with updates in several passes per process), held-out evaluation
included, each logged once; and a checkpoint of the two-process run resumes to the same
figures.

Completions come from `tests.helpers.scripted_sampler`, which depends only on the prompt, so both
runs train on the same tokens and any difference is the distributed reduction's.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.helpers.compare import assert_updates_were_not_trivial, histories, timed
from tests.helpers.training_process import start_training
from tests.runs.test_resume import finish, only_run

TWO_PROCESSES = ["trainer.devices=2", "trainer.strategy=ddp"]
RUN = [
    "model=tiny", "sft.enabled=false", "data.batch_size=4", "data.val_size=10",
    "data.eval_batch_size=3", "algo.group_size=4", "algo.max_completion_length=6",
    "+reward.functions.printable._target_=tests.helpers.dense_reward.PrintableShare",
    "rollout._target_=tests.helpers.scripted_sampler.ScriptedSampler",
    "algo.optimizer.lr=3e-3", "algo.scheduler.name=constant", "algo.samples_every_n_steps=2",
    "trainer.val_check_interval=2", "callbacks.checkpoint.every_n_train_steps=2",
]  # fmt: skip
LOSSES = {  # loss type -> what else its runs exercise
    "grpo": ["algo.num_iterations=2", "algo.epsilon_low=0.01", "algo.epsilon_high=0.01"],
    "dapo": ["algo.kl_beta=0.05", "algo.scale_rewards=batch", "algo.max_tokens_per_pass=40"],
}
STEPS = 4
RELATIVE, ABSOLUTE = 1e-4, 1e-6  # float sums in another order; all else must match


def start(root: Path, run: str, *overrides: str) -> subprocess.Popen:
    """Start GRPO with its store under `root` and its folder at root/run."""
    return start_training(
        *RUN, f"paths.output_root={root}", f"paths.run_dir={root / run}", *overrides
    )


def recorded(root: Path, process: subprocess.Popen) -> dict[str, list[tuple[int, float]]]:
    """Wait for the run to end well; the metric histories of the one run under `root`."""
    finish(process)
    client, run = only_run(root)
    return histories(client, run)


def differences(
    one: dict[str, list[tuple[int, float]]], two: dict[str, list[tuple[int, float]]]
) -> dict[str, float]:
    """The largest relative difference per metric, after checking both logged the same
    metrics at the same steps, each step once."""
    assert one.keys() == two.keys(), sorted(one.keys() ^ two.keys())
    largest = {}
    for key, values in one.items():
        theirs = two[key]
        if key.startswith("room/"):  # a run's end figures: a continued run's first part has one too
            ends = {step for step, _ in values}
            theirs = [(step, value) for step, value in theirs if step in ends]
        steps = [step for step, _ in values]
        assert steps == [step for step, _ in theirs], (key, steps, theirs)
        assert len(set(steps)) == len(steps), (key, steps)  # logged once, not once per process
        if not timed(key):
            largest[key] = max(
                abs(a - b) / max(abs(a), abs(b), ABSOLUTE / RELATIVE)
                for (_, a), (_, b) in zip(values, theirs, strict=True)
            )
    return largest


@pytest.mark.slow
@pytest.mark.parametrize("loss_type", sorted(LOSSES))
def test_two_processes_log_what_one_process_logs(tmp_path, loss_type):
    """For `grpo` the two-process run stops at step 2 and is continued from its checkpoint,
    so the comparison also shows that a distributed checkpoint resumes exactly."""
    overrides = [f"algo.loss_type={loss_type}", *LOSSES[loss_type]]
    # The one-process run goes alongside the first two-process one: they spend most of their
    # time starting up, one core each.
    one_process = start(tmp_path / "one", "run", *overrides, f"trainer.max_steps={STEPS}")
    root = tmp_path / "two"
    if loss_type == "grpo":
        first = start(root, "first", *overrides, *TWO_PROCESSES, f"trainer.max_steps={STEPS // 2}")
        finish(first)
        resume = [f"ckpt_path={root / 'first' / 'checkpoints' / 'last.ckpt'}"]
    else:
        resume = []
    two_processes = start(
        root, "run", *overrides, *TWO_PROCESSES, f"trainer.max_steps={STEPS}", *resume
    )
    one = recorded(tmp_path / "one", one_process)
    two = recorded(root, two_processes)
    if resume:
        _, run = only_run(root)  # the continuation wrote into the same MLflow run
        assert run.data.tags["resumes"] == "1"
        assert run.data.tags["resumed_from_step"] == str(STEPS // 2)
    assert_updates_were_not_trivial(one)
    assert one["eval/reward"][0][0] == 0 and len(one["eval/reward"]) >= 2
    assert [step for step, _ in one["loss"]] == list(range(1, STEPS + 1))
    largest = differences(one, two)
    worst = sorted(largest.items(), key=lambda item: -item[1])[:4]
    print(f"{loss_type}: largest relative differences, 2 processes vs 1: {worst}")
    assert max(largest.values()) < RELATIVE, worst
    for key in ("loss", "grad_norm", "kl", "entropy", "reward", "eval/reward", "num_tokens"):
        assert key in largest
