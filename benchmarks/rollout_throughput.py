"""Completion tokens per second of the rollout backends (hf, vllm) on the same prompts.

Each backend samples G completions for every prompt, as a GRPO step does, from the same model
loaded through the real config (`model=...`, `rollout=...`). The first rollout is timed apart
(vLLM starts its engine there); the median of the following ones gives the throughput. Prompts
are two-digit additions, as in the embedded arithmetic task. Needs a CUDA GPU for vllm; hf also
runs on CPU.

    python benchmarks/rollout_throughput.py [--model smollm2_135m] [--prompts 32] [--group-size 8]
        [--max-tokens 128] [--repeats 3] [--backends hf vllm] [override ...]
"""

from __future__ import annotations

import argparse
import gc
import random
import statistics
import tempfile
import time
from dataclasses import dataclass

import torch

from src.utils.compose import compose_train_config
from src.utils.config import build
from src.utils.errors import UserError, unwrapped
from src.utils.resolvers import PROJECT_ROOT


@dataclass
class Figures:
    """One backend's measurements."""

    backend: str
    first_s: float  # the first rollout, engine start included
    median_s: float  # median seconds per rollout after the first
    tokens: float  # mean counted completion tokens per rollout
    tokens_per_s: float  # counted tokens over the time of the timed rollouts


def addition_prompts(count: int, seed: int = 0) -> list[str]:
    """`count` two-digit addition questions, the same for every backend."""
    rng = random.Random(seed)
    return [
        f"What is {rng.randint(10, 99)} + {rng.randint(10, 99)}?\nAnswer:" for _ in range(count)
    ]


def synchronize() -> None:
    """Wait for queued GPU work, so a stopwatch reads finished work."""
    if torch.cuda.is_available():
        torch.cuda.synchronize()


def measure(backend: str, args: argparse.Namespace, folder: str) -> Figures | str:
    """Time `args.repeats` rollouts (after a first one) with `backend`; a string says why the
    backend could not run here."""
    hardware = "gpu" if torch.cuda.is_available() else "cpu"
    cfg = compose_train_config(
        [
            f"model={args.model}",
            f"rollout={backend}",
            f"hardware=[{hardware}]",
            f"algo.max_completion_length={args.max_tokens}",
            f"paths.output_root={folder}",
            f"paths.models_dir={PROJECT_ROOT / 'outputs' / 'models'}",  # converted models are kept
            f"paths.run_dir={folder}/run",
            *args.overrides,
        ]
    )
    try:
        sampler = build(cfg.rollout)
    except Exception as error:  # rollout=vllm without a GPU or without vLLM: said, not raised
        if not isinstance(unwrapped(error), UserError):
            raise
        return f"{backend}: not run ({unwrapped(error)})"
    lm = build(cfg.model)
    if torch.cuda.is_available():
        lm.network.to("cuda")
    lm.network.eval()
    prompts = addition_prompts(args.prompts)
    torch.manual_seed(0)
    started = time.perf_counter()
    sampler.sample(lm, prompts, args.group_size)
    synchronize()
    first = time.perf_counter() - started
    seconds, tokens = [], []
    for _ in range(args.repeats):
        started = time.perf_counter()
        rollout = sampler.sample(lm, prompts, args.group_size)
        synchronize()
        seconds.append(time.perf_counter() - started)
        tokens.append(int(rollout.lengths.sum()))
    del sampler, lm
    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()
    return Figures(
        backend=backend,
        first_s=first,
        median_s=statistics.median(seconds),
        tokens=statistics.mean(tokens),
        tokens_per_s=sum(tokens) / sum(seconds),
    )


def main() -> None:
    """Measure each backend and print one table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="smollm2_135m", help="a conf/model option")
    parser.add_argument("--prompts", type=int, default=32, help="prompts per rollout")
    parser.add_argument("--group-size", type=int, default=8, help="completions per prompt")
    parser.add_argument("--max-tokens", type=int, default=128, help="completion tokens at most")
    parser.add_argument("--repeats", type=int, default=3, help="timed rollouts after the first")
    parser.add_argument(
        "--backends", nargs="+", default=["hf", "vllm"], help="conf/rollout options"
    )
    parser.add_argument("overrides", nargs="*", help="extra Hydra overrides")
    args = parser.parse_args()
    device = torch.cuda.get_device_name() if torch.cuda.is_available() else "CPU"
    print(
        f"model={args.model} on {device}: {args.prompts} prompts x {args.group_size} completions, "
        f"at most {args.max_tokens} tokens, {args.repeats} timed rollouts"
    )
    results = []
    with tempfile.TemporaryDirectory() as folder:
        for backend in args.backends:
            results.append(measure(backend, args, folder))
    print(f"{'backend':<8} {'first s':>8} {'median s':>9} {'tokens':>8} {'tokens/s':>10}")
    for figures in results:
        if isinstance(figures, str):
            print(figures)
            continue
        print(
            f"{figures.backend:<8} {figures.first_s:>8.2f} {figures.median_s:>9.3f} "
            f"{figures.tokens:>8.0f} {figures.tokens_per_s:>10.0f}"
        )


if __name__ == "__main__":
    main()
