"""Peak memory and seconds per GRPO step of the hardware presets, for the README's table.

Each setting runs `python -m src.train` in its own process (so its peak resident memory is
its own), the settings taking turns `--rounds` times, as the CPU is shared and noisy. Per
setting it prints the peak RSS of the process and the median `step_time` of the steps after
the first (rollout, log-probs and update; model loading and evaluation excluded).

    .venv/bin/python benchmarks/hardware_memory.py [--steps 4] [--rounds 2] [override ...]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import mlflow

from src.utils.resolvers import PROJECT_ROOT

SETTINGS = {  # name -> overrides over the shared ones
    "fp32, full fine-tuning": ["hardware=[cpu]", "model.lora=null"],
    "fp32, LoRA r16": ["hardware=[cpu,lora]", "model.lora.lora_dropout=0.0"],
    "4-bit NF4 + LoRA r16 (QLoRA)": ["hardware=[cpu,4bit,lora]", "model.lora.lora_dropout=0.0"],
}
SHARED = [  # SmolLM2-135M on the arithmetic task: 4 prompts x 4 completions of <= 32 tokens
    "task=arithmetic", "model=smollm2_135m", "sft.enabled=false", "data.batch_size=4",
    "algo.group_size=4", "algo.max_completion_length=32", "data.max_val_rows=4",
    "algo.samples_every_n_steps=0", "save_model=null", "callbacks.checkpoint.every_n_train_steps=1000",
]  # fmt: skip


def run(name: str, steps: int, root: Path, extra: list[str]) -> tuple[float, list[float]]:
    """One training process: its peak RSS in GiB and its steps' `step_time` after the first."""
    store = root / f"store-{abs(hash((name, os.times().elapsed)))}"
    command = [
        sys.executable, "-m", "src.train", *SHARED, *SETTINGS[name], *extra,
        f"trainer.max_steps={steps}", f"trainer.val_check_interval={steps}",
        f"paths.output_root={store}", f"paths.models_dir={PROJECT_ROOT}/outputs/models",
        f"paths.run_dir={store}/run",
    ]  # fmt: skip
    process = subprocess.Popen(
        command, cwd=PROJECT_ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    output = process.stdout.read() if process.stdout else ""
    _, status, usage = os.wait4(process.pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{name}: the run failed:\n{output[-3000:]}")
    client = mlflow.MlflowClient(f"sqlite:///{store}/mlflow.db")
    (experiment,) = [e for e in client.search_experiments() if e.name == "arithmetic"]
    (found,) = client.search_runs([experiment.experiment_id])
    history = sorted(
        client.get_metric_history(found.info.run_id, "step_time"), key=lambda m: m.step
    )
    return usage.ru_maxrss / 2**20, [m.value for m in history[1:]]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=4, help="GRPO steps per run")
    parser.add_argument("--rounds", type=int, default=2, help="turns of every setting")
    parser.add_argument("overrides", nargs="*", help="extra Hydra overrides for every run")
    args = parser.parse_args()
    peaks: dict[str, list[float]] = {name: [] for name in SETTINGS}
    times: dict[str, list[float]] = {name: [] for name in SETTINGS}
    with tempfile.TemporaryDirectory() as folder:
        for round_ in range(args.rounds):
            for name in SETTINGS:
                peak, step_times = run(name, args.steps, Path(folder), args.overrides)
                peaks[name].append(peak)
                times[name] += step_times
                print(f"round {round_ + 1} {name}: {peak:.2f} GiB, steps {step_times}", flush=True)
    print("\n| setting | peak RSS (GiB) | s/step (median) |")
    print("|---|---|---|")
    for name in SETTINGS:
        print(f"| {name} | {max(peaks[name]):.2f} | {statistics.median(times[name]):.1f} |")


if __name__ == "__main__":
    main()
