"""Seconds of one rollout of the hf sampler (the sampling phase of a GRPO step) on a model
folder, with LoRA, after a warm-up rollout: the median of --repeats rollouts.

The default shape is the rewriter's (task=medqa_rewriter): 4 prompts of about 245 tokens cut
from the findings sample, G 8, 32 tokens forced, Gemma 3 270M's converted folder. Only
`load_causal_lm` and `HFSampler` are used, so the same script measures an older tree of
this project too, taking turns with this one:

    git worktree add /tmp/before 70d8fc9
    PYTHONPATH=/tmp/before nice .venv/bin/python benchmarks/sampling_phase.py --label before
    PYTHONPATH=. nice .venv/bin/python benchmarks/sampling_phase.py --label after
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--label", default="this tree", help="printed before the figures")
    parser.add_argument("--folder", default=str(REPO / "outputs" / "models" / "gemma3_270m"))
    parser.add_argument("--prompts", type=int, default=4, help="B prompts")
    parser.add_argument("--group-size", type=int, default=8, help="G completions per prompt")
    parser.add_argument("--tokens", type=int, default=32, help="completion tokens, forced")
    parser.add_argument("--prompt-chars", type=int, default=700, help="characters per prompt")
    parser.add_argument("--repeats", type=int, default=4, help="timed rollouts")
    parser.add_argument("--dtype", default="float32", help="model.dtype (bfloat16, ...)")
    args = parser.parse_args()

    import torch

    from src.model.causal_lm import load_causal_lm
    from src.rollout.hf import HFSampler
    from src.utils.allocator import keep_freed_memory

    keep_freed_memory()  # as a training run does (`src.runs.parts`)
    lora = {"r": 16, "lora_alpha": 32, "lora_dropout": 0.0, "target_modules": "all-linear"}
    lm = load_causal_lm(args.folder, dtype=args.dtype, lora=lora, max_prompt_length=512)
    text = (REPO / "src" / "data" / "samples" / "medqa_findings_sample.jsonl").read_text()
    step = 1000
    prompts = [text[step * i : step * i + args.prompt_chars] for i in range(args.prompts)]
    sampler = HFSampler(max_completion_length=args.tokens, min_completion_length=args.tokens)
    torch.manual_seed(0)
    sampler.sample(lm, prompts, group_size=args.group_size)  # probes, first allocations
    seconds = []
    for _ in range(args.repeats):
        start = time.perf_counter()
        rollout = sampler.sample(lm, prompts, group_size=args.group_size)
        seconds.append(time.perf_counter() - start)
    print(
        f"{args.label}: prompts {tuple(rollout.prompt_ids.shape)}, completions "
        f"{tuple(rollout.completion_ids.shape)}, median {statistics.median(seconds):.2f} s "
        f"({', '.join(f'{s:.2f}' for s in seconds)})",
        flush=True,
    )


if __name__ == "__main__":
    main()
