"""Seconds of the sampling, reference and policy forward+backward passes of Gemma 3 270M +
LoRA at the rewriter's shape (4 prompts of about 245 tokens, G 8, 32 tokens forced), in
bfloat16 and in float32, taking turns in one process: the medians of 3 rounds after a warm-up
round, and the float32 / bfloat16 ratios.

    OMP_NUM_THREADS=2 .venv/bin/python benchmarks/precision_phases.py
"""

from __future__ import annotations

import statistics
import time
from pathlib import Path

import torch

from src.model.causal_lm import CausalLM, load_causal_lm
from src.model.network import Sequences
from src.rollout.hf import HFSampler
from src.utils.allocator import keep_freed_memory

REPO = Path(__file__).resolve().parents[1]
DTYPES = ("bfloat16", "float32")
PHASES = ("sampling", "reference", "forward+backward")


def phases(lm: CausalLM, sampler: HFSampler, prompts: list[str]) -> list[float]:
    """Seconds of one rollout, the reference's log-probs and the policy's with a backward."""
    start = time.perf_counter()
    rollout = sampler.sample(lm, prompts, group_size=8)
    return [time.perf_counter() - start, *log_prob_passes(lm, rollout)]


def log_prob_passes(lm: CausalLM, rollout: Sequences) -> list[float]:
    """Seconds of the reference's log-probs of `rollout` and the policy's with a backward."""
    start = time.perf_counter()
    with torch.no_grad(), lm.adapter_disabled():
        lm.log_probs(rollout)
    referenced = time.perf_counter()
    log_probs, _ = lm.log_probs(rollout)
    log_probs.sum().backward()
    return [referenced - start, time.perf_counter() - referenced]


def main() -> None:
    keep_freed_memory()  # as a training run does (`src.runs.parts`)
    lora = {"r": 16, "lora_alpha": 32, "lora_dropout": 0.0, "target_modules": "all-linear"}
    folder = str(REPO / "outputs" / "models" / "gemma3_270m")
    lms = {d: load_causal_lm(folder, dtype=d, lora=lora, max_prompt_length=512) for d in DTYPES}
    text = (REPO / "src" / "data" / "samples" / "medqa_findings_sample.jsonl").read_text()
    prompts = [text[1000 * i : 1000 * i + 700] for i in range(4)]
    sampler = HFSampler(max_completion_length=32, min_completion_length=32)
    torch.manual_seed(0)
    for lm in lms.values():
        phases(lm, sampler, prompts)  # probes, first allocations
    rounds: dict[str, list[list[float]]] = {d: [] for d in DTYPES}
    for _ in range(3):
        for dtype, lm in lms.items():
            rounds[dtype].append(phases(lm, sampler, prompts))
    medians = {d: [statistics.median(r[i] for r in rounds[d]) for i in range(3)] for d in DTYPES}
    for dtype, seconds in medians.items():
        parts = "  ".join(f"{name} {s:.2f}" for name, s in zip(PHASES, seconds, strict=True))
        print(f"{dtype}: {parts}  total {sum(seconds):.2f} s", flush=True)
    ratios = [f / b for f, b in zip(medians["float32"], medians["bfloat16"], strict=True)]
    total = sum(medians["float32"]) / sum(medians["bfloat16"])
    print("float32 / bfloat16: " + "  ".join(f"{r:.2f}" for r in ratios) + f"  total {total:.2f}")


if __name__ == "__main__":
    main()
