"""Median seconds per GRPO step of the real training path, ours alone.

The shape is configuration (a) of `benchmarks/vs_trl.py` (tiny 1.1M model, B 8, G 8, 64
completion tokens), which times TRL's GRPOTrainer beside it. This runs it through `src.train.train` (no
warm start, so completions run to the length limit) and prints the median `step_time`
(rollout + update) and the wall-clock time per step including logging.

    .venv/bin/python benchmarks/grpo_step_time.py [--steps 30] [override ...]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time

import mlflow

from src.train import train
from src.utils.compose import compose_train_config


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=30, help="GRPO steps to time")
    parser.add_argument("overrides", nargs="*", help="extra Hydra overrides")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        overrides = [
            "model=tiny",
            "sft.enabled=false",
            f"trainer.max_steps={args.steps}",
            f"trainer.val_check_interval={args.steps}",
            "data.batch_size=8",
            "data.val_size=8",
            "algo.group_size=8",
            "algo.max_completion_length=64",
            "algo.samples_every_n_steps=0",
            f"paths.output_root={folder}",
            f"paths.run_dir={folder}/run",
            *args.overrides,
        ]
        cfg = compose_train_config(overrides)
        started = time.perf_counter()
        train(cfg)
        total = time.perf_counter() - started
        client = mlflow.MlflowClient(tracking_uri=cfg.paths.mlflow_uri)
        run = client.search_runs([client.get_experiment_by_name(cfg.task_name).experiment_id])[0]
        times = [m.value for m in client.get_metric_history(run.info.run_id, "step_time")]
        lengths = [
            m.value for m in client.get_metric_history(run.info.run_id, "completions/mean_length")
        ]
    steady = times[2:] or times  # the first steps pay for warm-up
    print(f"overrides: {' '.join(overrides[:-2])}")
    print(f"steps: {len(times)}, mean completion length: {statistics.mean(lengths):.1f} tokens")
    print(f"median step_time: {statistics.median(steady):.3f} s/step (rollout + update)")
    print(
        f"whole run incl. model load, evals and logging: {total:.1f} s, {total / len(times):.3f} s/step"
    )


if __name__ == "__main__":
    main()
