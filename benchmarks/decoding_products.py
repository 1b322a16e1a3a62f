"""One decoding step's products, kernel by kernel: every linear weight of a model's shape
multiplied once by a step's rows, as a decoding step does, taking turns over rounds.

The weights are random, of the shapes of the model folder's config (its `nn.Linear` layers,
the vocabulary head included), and 64 MiB of other memory is written before each timed step,
so their bytes come from memory as a step's do (between two steps a decoding reads its whole
key/value cache). Kernels: torch's
`F.linear` (MKL on the CPU), MKL's product on copies packed once (`packed_weights` on MKL),
oneDNN's on the plain weights (reordered on every call) and oneDNN's on copies reordered once
(`onednn.prepacked`, what decoding takes where `onednn_packed_decoding` says so). Prints the
median milliseconds per step of each and its ratio to `F.linear`.

With `--by-shape`, each distinct weight shape alone instead (hot operands, the kernels taking
turns per shape): its count in the model, its median per kernel as a share of `F.linear`'s, and
the shares over one pass of every weight, each shape weighted by its count: at a log-prob
pass's rows (`--rows 1024`), what a verdict timed over every product of a pass would read.

With `--rollouts N`, also what decides: whole rollouts of B prompts x G completions of T
tokens through our sampler (the fused steps, their products fused per layer), decoding's
products on MKL and on oneDNN's reordered copies (the `onednn_packed_decoding` verdict taken as
each in turn, whatever this machine's is), taking turns in one process over N pairs; the
median seconds of each and the median ratio of the pairs. With `--dtype bfloat16` the
rollouts run in bfloat16 (the model's `model.dtype=bfloat16`), and the two kernels are torch's
bfloat16 product and oneDNN's on bfloat16 copies reordered once (`onednn_packed_decoding_bf16`).

    nice .venv/bin/python benchmarks/decoding_products.py --rows 64 --rollouts 10   # (a)'s shape
    nice .venv/bin/python benchmarks/decoding_products.py --folder outputs/models/smollm2_135m_instruct --rows 16 --prompts 4 --group-size 4 --lora --rollouts 3   # (b)'s
    nice .venv/bin/python benchmarks/decoding_products.py --folder outputs/models/smollm2_135m_instruct --rows 1024 --by-shape --rounds 13
    nice .venv/bin/python benchmarks/decoding_products.py --folder outputs/models/gemma3_270m --rows 32 --rounds 3 --prompts 4 --group-size 8 --tokens 32 --lora --dtype bfloat16 --rollouts 10 [--prompt-chars 700]
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections import Counter
from collections.abc import Callable
from functools import partial
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
EVICTED_BYTES = 64 * 2**20  # written between timed steps, beyond a processor's caches


def step_kernels(weights: list, rows: int) -> dict[str, Callable[[], list]]:
    """Per kernel, one step: every weight multiplied once by `rows` rows (the products
    returned, the same numbers from each kernel up to float rounding). The packed and
    reordered products are decoding's own (`src.model.fast.packed.packed_product`)."""
    import torch
    import torch.nn.functional as F

    from src.model.fast import onednn
    from src.model.fast.packed import packed_product

    generator = torch.Generator().manual_seed(0)
    inputs = [torch.randn(rows, w.size(1), generator=generator) for w in weights]
    products = {
        "F.linear (MKL)": [partial(F.linear, weight=w) for w in weights],
        "MKL packed": [packed_product(w, None, rows, through_onednn=False) for w in weights],
        "oneDNN, plain weights": [partial(onednn.product, weight=w) for w in weights],
        "oneDNN, reordered once": [packed_product(w, None, rows, True) for w in weights],
    }

    def step(kernel: list[Callable]) -> list:
        return [product(x) for product, x in zip(kernel, inputs, strict=True)]

    return {name: partial(step, kernel) for name, kernel in products.items()}


def taking_turns(
    kernels: dict[str, Callable[[], object]],
    rounds: int,
    before: Callable[[], object] | None = None,
) -> dict[str, list[float]]:
    """Each kernel's seconds per call over `rounds` rounds, every kernel once a round, which goes
    first alternating, after one round that warms them up (not counted); `before` runs before
    each call, untimed."""
    times: dict[str, list[float]] = {name: [] for name in kernels}
    for turn in range(rounds + 1):
        for name in list(kernels) if turn % 2 else list(reversed(kernels)):
            if before is not None:
                before()
            start = time.perf_counter()
            kernels[name]()
            if turn:
                times[name].append(time.perf_counter() - start)
    return times


def by_shape(
    weights: list, rows: int, rounds: int
) -> dict[tuple[int, int], tuple[int, dict[str, float]]]:
    """Per distinct weight shape (out, in): its count among `weights` and each kernel's median
    seconds for one product of `rows` rows, the kernels taking turns over `rounds` rounds
    after one that warms them up."""
    counts = Counter(tuple(weight.shape) for weight in weights)
    first: dict[tuple[int, int], object] = {}
    for weight in weights:
        first.setdefault(tuple(weight.shape), weight)
    found = {}
    for shape, weight in first.items():
        times = taking_turns(step_kernels([weight], rows), rounds)
        found[shape] = (counts[shape], {k: statistics.median(v) for k, v in times.items()})
    return found


def print_by_shape(found: dict[tuple[int, int], tuple[int, dict[str, float]]], rows: int) -> None:
    """`by_shape`'s table: per shape, F.linear's milliseconds and each kernel's share of them;
    then each kernel's share over one pass of every weight."""
    names = list(next(iter(found.values()))[1])
    base = "F.linear (MKL)"
    print(f"  {'rows x in -> out':24s} {'count':>5s} {base:>15s}  " + "  ".join(names[1:]))
    for (out, width), (count, seconds) in found.items():
        shares = "  ".join(f"{seconds[n] / seconds[base]:{len(n)}.2f}" for n in names[1:])
        label = f"{rows} x {width} -> {out}"
        print(f"  {label:24s} {count:5d} {1e3 * seconds[base]:12.3f} ms  {shares}")
    total = {n: sum(count * seconds[n] for count, seconds in found.values()) for n in names}
    shares = "  ".join(f"{total[n] / total[base]:{len(n)}.2f}" for n in names[1:])
    print(f"  {'one pass, every weight':24s} {'':5s} {1e3 * total[base]:12.3f} ms  {shares}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--folder", default=str(REPO / "outputs" / "models" / "tiny_llama_h128_l4"))
    parser.add_argument("--rows", type=int, default=64, help="a batch's B x G rows")
    parser.add_argument("--rounds", type=int, default=7, help="rounds, each kernel once a round")
    parser.add_argument("--rollouts", type=int, default=0, help="pairs of rollouts (0: none)")
    parser.add_argument("--prompts", type=int, default=8, help="B prompts of the rollouts")
    parser.add_argument("--group-size", type=int, default=8, help="G completions per prompt")
    parser.add_argument("--tokens", type=int, default=64, help="T completion tokens, forced")
    parser.add_argument("--lora", action="store_true", help="LoRA r16 on q, k, v, o, as (b)")
    parser.add_argument("--dtype", default="float32", help="the rollouts' model.dtype")
    parser.add_argument(
        "--prompt-chars",
        type=int,
        default=0,
        help="prompts cut from the findings sample (0: short)",
    )
    parser.add_argument("--by-shape", action="store_true", help="each weight shape alone, hot")
    args = parser.parse_args()

    import torch
    from torch import nn
    from transformers import AutoConfig, AutoModelForCausalLM

    from src.utils.per_machine import processor

    with torch.device("meta"):  # shapes only
        network = AutoModelForCausalLM.from_config(AutoConfig.from_pretrained(args.folder))
    shapes = [tuple(m.weight.shape) for m in network.modules() if type(m) is nn.Linear]
    generator = torch.Generator().manual_seed(1)
    weights = [torch.randn(*shape, generator=generator) * 0.02 for shape in shapes]
    if args.by_shape:
        from src.utils.allocator import keep_freed_memory

        keep_freed_memory()  # as a training run does: the outputs' memory is reused, not faulted in
        print(
            f"{processor()}, {torch.get_num_threads()} threads: the products of "
            f"{args.folder} shape by shape at {args.rows} rows, median of {args.rounds} rounds"
        )
        print_by_shape(by_shape(weights, args.rows, args.rounds), args.rows)
        return
    other = torch.zeros(EVICTED_BYTES // 4)
    # the caches hold other data before each step, as after a step's attention
    times = taking_turns(step_kernels(weights, args.rows), args.rounds, partial(other.add_, 1.0))
    size = sum(w.numel() for w in weights) * 4 / 2**20
    print(
        f"{processor()}, {torch.get_num_threads()} threads: one step's products of "
        f"{args.folder} ({len(weights)} weights, {size:.0f} MiB) at {args.rows} rows, "
        f"median of {args.rounds} rounds"
    )
    base = statistics.median(times["F.linear (MKL)"])
    for name, seconds in times.items():
        median = statistics.median(seconds)
        print(f"  {name:24s} {1e3 * median:8.2f} ms  ({median / base:.2f} of F.linear)")
    if args.rollouts:
        rollouts(args)


def rollouts(args: argparse.Namespace) -> None:
    """Rollouts of `args`' shape, decoding's products on MKL and on oneDNN taking turns."""
    import torch

    from src.model.causal_lm import load_causal_lm
    from src.model.fast import onednn
    from src.rollout.hf import HFSampler
    from src.utils.allocator import keep_freed_memory

    keep_freed_memory()  # as a training run does
    targets = ["q_proj", "k_proj", "v_proj", "o_proj"]
    lora = {"r": 16, "lora_alpha": 32, "lora_dropout": 0.0, "target_modules": targets}
    lm = load_causal_lm(args.folder, dtype=args.dtype, lora=lora if args.lora else None)
    prompts = [f"Question {i}: what is {i} + {3 * i}? Answer:" for i in range(args.prompts)]
    if args.prompt_chars:  # the rewriter's prompts, as benchmarks/precision_phases.py cuts them
        text = (REPO / "src" / "data" / "samples" / "medqa_findings_sample.jsonl").read_text()
        prompts = [text[1000 * i : 1000 * i + args.prompt_chars] for i in range(args.prompts)]
    sampler = HFSampler(max_completion_length=args.tokens, min_completion_length=args.tokens)
    widths = onednn.widths_of(lm.network)
    verdict = onednn.decoding_verdict(getattr(torch, args.dtype))

    def rollout(through_onednn: bool) -> None:
        onednn.take(verdict, widths, through_onednn)  # decoding's kernel now
        sampler.sample(lm, prompts, group_size=args.group_size)

    torch.manual_seed(0)
    seconds = taking_turns(
        {"mkl": partial(rollout, False), "onednn": partial(rollout, True)}, args.rollouts
    )
    ratio = statistics.median(o / m for o, m in zip(seconds["onednn"], seconds["mkl"], strict=True))
    print(
        f"rollouts of {args.prompts} x {args.group_size} rows, {args.tokens} tokens, "
        f"{args.rollouts} pairs, {args.dtype}: torch's (MKL in float32) "
        f"{statistics.median(seconds['mkl']):.3f} s, oneDNN "
        f"reordered {statistics.median(seconds['onednn']):.3f} s, oneDNN / MKL {ratio:.2f}"
    )


if __name__ == "__main__":
    main()
