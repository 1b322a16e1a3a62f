"""The same seed on CPU gives the same run: sampled completions, rewards, losses, weights."""

from __future__ import annotations

from pathlib import Path

import mlflow

from src.train import train
from tests.helpers.compare import (
    assert_updates_were_not_trivial,
    histories,
    max_difference,
    weights,
)

WATCHED = [
    "reward", "reward_std", "completions/mean_length", "entropy", "kl", "loss", "grad_norm",
    "eval/accuracy", "eval/reward",
]  # fmt: skip


def run_with(make_cfg, folder: Path, *overrides: str):
    """Train 3 steps into `folder`; the metric histories and the saved weights."""
    cfg = make_cfg(
        "trainer.max_steps=3",
        "algo.max_completion_length=8",
        "algo.kl_beta=0.05",  # the loss is then non-zero: with GRPO alone it sums to 0
        f"paths.output_root={folder}",
        f"paths.run_dir={folder / 'run'}",
        *overrides,
    )
    train(cfg)
    client = mlflow.MlflowClient(tracking_uri=cfg.paths.mlflow_uri)
    (run,) = client.search_runs([client.get_experiment_by_name(cfg.task_name).experiment_id])
    return histories(client, run, WATCHED), weights(Path(cfg.save_model))


def test_the_same_seed_gives_the_same_first_steps(make_cfg, models_dir, tmp_path):
    first, first_weights = run_with(make_cfg, tmp_path / "first")
    second, second_weights = run_with(make_cfg, tmp_path / "second")
    assert [step for step, _ in first["loss"]] == [1, 2, 3]
    assert first == second
    assert max_difference(first_weights, second_weights) == 0.0
    # What was compared could have differed: the updates were real and moved the weights ...
    assert_updates_were_not_trivial(first)
    start = weights(models_dir / "tiny_llama_h128_l4")
    assert max_difference(first_weights, start) > 5e-5  # Adam at lr 1e-4: ~1e-4 a step
    # ... and another seed samples other completions and ends elsewhere.
    other, other_weights = run_with(make_cfg, tmp_path / "other", "seed=7")
    assert other["completions/mean_length"] != first["completions/mean_length"]
    assert max_difference(other_weights, first_weights) > 5e-5
