"""Seconds of the log-prob passes (the reference's, without gradients, and the policy's
forward and backward) of Gemma 3 270M + LoRA at the rewriter's shape (4 prompts of about 245
tokens, G 8, 32 tokens), their attention through `grouped_attention` and through transformers'
`sdpa`, taking turns in one process: the medians of --rounds rounds after a warm-up round,
and the ratios.

    OMP_NUM_THREADS=2 .venv/bin/python benchmarks/grouped_attention.py --dtype bfloat16
    OMP_NUM_THREADS=2 .venv/bin/python benchmarks/grouped_attention.py --dtype float32
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dtype", default="bfloat16", help="model.dtype")
    parser.add_argument("--rounds", type=int, default=5, help="timed rounds, each way once")
    args = parser.parse_args()

    import torch
    from precision_phases import log_prob_passes

    from src.model import causal_lm
    from src.model.causal_lm import load_causal_lm
    from src.rollout.hf import HFSampler
    from src.utils.allocator import keep_freed_memory

    keep_freed_memory()  # as a training run does (`src.runs.parts`)
    lora = {"r": 16, "lora_alpha": 32, "lora_dropout": 0.0, "target_modules": "all-linear"}
    folder = str(REPO / "outputs" / "models" / "gemma3_270m")
    lm = load_causal_lm(folder, dtype=args.dtype, lora=lora, max_prompt_length=512)
    text = (REPO / "src" / "data" / "samples" / "medqa_findings_sample.jsonl").read_text()
    prompts = [text[1000 * i : 1000 * i + 700] for i in range(4)]
    sampler = HFSampler(max_completion_length=32, min_completion_length=32)
    torch.manual_seed(0)
    rollout = sampler.sample(lm, prompts, group_size=8)
    grouped = causal_lm.grouped_attention

    def passes(way: str) -> list[float]:
        causal_lm.grouped_attention = (
            grouped if way == "grouped" else lambda *a, **k: contextlib.nullcontext(False)
        )
        return log_prob_passes(lm, rollout)

    ways = ("sdpa", "grouped")
    for way in ways:
        passes(way)  # the probes, first allocations
    seconds: dict[str, list[list[float]]] = {way: [] for way in ways}
    for turn in range(args.rounds):
        for way in ways if turn % 2 else reversed(ways):
            seconds[way].append(passes(way))
    causal_lm.grouped_attention = grouped
    medians = {w: [statistics.median(r[i] for r in seconds[w]) for i in range(2)] for w in ways}
    for way, (reference, policy) in medians.items():
        print(
            f"{args.dtype}, attention {way}: reference {reference:.2f} s, "
            f"forward+backward {policy:.2f} s, both {reference + policy:.2f} s",
            flush=True,
        )
    plain, fast = (sum(medians[w]) for w in ways)
    print(f"grouped / sdpa: {fast / plain:.2f}")


if __name__ == "__main__":
    main()
