"""The decoding steps the hf sampler runs: the quickest that are proven on this network.

Five fast paths serve decoding. On a GPU: `captured_steps` (`StaticSteps`, the fused step with
fixed shapes, replayed as a CUDA graph), and `static_steps`, the same step without the graph
(what the CPU tests run). On the CPU: `fused_steps` (`LlamaSteps`, our own step for float32
Llama-family networks), `packed_weights` (MKL-packed weights, inside the fused step or under
the modules). Anywhere: `cache_room` (the module cache allocated once). Each is checked the
same way before its first use on a kind of network: the very steps object the sampler is about
to use decodes a probe batch for a few steps with the probe's tokens fed back (teacher
forcing), and the log-softmaxed logits of every step are compared with those of one forward
of the network over the same sequences, without a cache. The one exception: packed fused
steps on a network whose unpacked fused steps are proven already differ from them only in
their products, so only those are compared (`fused_steps_proven`). A path that differs, or
raises, is left out and the next one down runs; the network's own forward and cache
(`ModuleSteps`) always can.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from functools import partial

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from src.model.fast.captured_steps import CapturedSteps
from src.model.fast.half_rounding import HALF_FACTOR, HALF_FLOOR, float32_yardstick
from src.model.fast.llama_steps import LlamaSteps, Product
from src.model.fast.packed import can_pack, packable, packed_linears
from src.model.fast.probe import (
    built,
    computed_dtype,
    device_of,
    imply,
    largest_difference,
    log_softmax_difference,
    measured_per_kind,
    probe_input,
    proven,
    proven_object,
    refused,
    standing,
)
from src.model.fast.static_steps import StaticSteps
from src.model.positions import position_ids
from src.model.steps import ModuleSteps, Steps


@contextlib.contextmanager
def decoding_steps(
    network: nn.Module,
    rows: int,
    keeps_few_logits: bool = True,
    fused: bool = True,
    packed: bool = True,
    static: bool | None = None,
) -> Iterator[Steps]:
    """Within the block, decoding steps for `rows` rows of `network` (in eval mode), the first
    of these that applies and is proven: `StaticSteps`, replayed as a CUDA graph on a GPU
    (where `static` asks for them; by default where `fused` does and the network is on a
    GPU); `LlamaSteps` packed, then unpacked (where `fused` asks for them); the network's
    modules under packed weights (where `packed` asks for them); the modules as they are. The
    modules' cache is allocated once where that is proven. `keeps_few_logits`: whether the
    network's forward takes `logits_to_keep`."""
    on_gpu = device_of(network).type == "cuda"
    if static is None:
        static = fused and on_gpu
    if static:
        path = "captured_steps" if on_gpu else "static_steps"
        build = partial(static_steps, network, rows, captured=on_gpu)
        check = partial(teacher_forced_difference, network, rows=rows)
        fixed = proven_object(path, network, build, check, decoding_tolerance(network, rows))
        if fixed is not None:
            yield fixed
            return
    # MKL packs float32 products: under autocast to a half type they would run in float32
    dtype = computed_dtype(network)
    packs = packed and can_pack(rows) and dtype == torch.float32 and packable(network)
    # the fused steps' bfloat16 products read copies reordered for oneDNN where that is
    # faster here (`Kernels.of`), so they try packed steps in bfloat16 too
    packs_fused = packs or (packed and can_pack(rows) and dtype == torch.bfloat16)
    if fused:
        for pack in [True, False] if packs_fused else [False]:
            path = "fused_steps+packed_weights" if pack else "fused_steps"
            steps = built(path, network, partial(LlamaSteps.of, network, rows, pack))
            if steps is None:
                if refused(path, network):
                    continue  # it raised while being built: the next one down may serve
                break  # not a network the fused steps serve
            if fused_steps_proven(network, steps, rows):
                yield steps
                return
    with_room = ModuleSteps(network, keeps_few_logits, make_room=True)
    room = proven(
        "cache_room",
        network,
        partial(teacher_forced_difference, network, with_room, rows),
        decoding_tolerance(network, rows),
    )
    steps = ModuleSteps(network, keeps_few_logits, make_room=room)
    if packs:
        with contextlib.ExitStack() as packing:
            routed = built(
                "packed_weights",
                network,
                partial(packing.enter_context, packed_linears(network, rows)),
            )
            check = partial(teacher_forced_difference, network, steps, rows)
            if routed is not None and proven("packed_weights", network, check):
                yield steps
                return
    yield steps


def static_steps(network: nn.Module, rows: int, captured: bool) -> Steps | None:
    """The fixed-shape fused steps for `network`: replayed as a CUDA graph where `captured`
    (on a GPU: `captured_steps`), as they are otherwise (`static_steps`); None where
    `StaticSteps` does not serve the network."""
    steps = StaticSteps.of(network, rows, pack=False)
    if steps is None:
        return None
    return CapturedSteps(steps) if captured else steps


def fused_steps_proven(network: nn.Module, steps: LlamaSteps, rows: int) -> bool:
    """Whether `steps` may decode for `network`. The fused step's arithmetic is proven by
    teacher forcing once per kind of network: as `fused_steps` where nothing is packed, or as
    `fused_steps+packed_weights`, which proves `fused_steps` too (the same code, with torch's
    public product in place of the packed one). Packed steps where `fused_steps` is already
    proven differ from proven steps only in their products, so those are what is compared:
    each distinct packed product with the public one (`packed_difference`)."""
    packed = steps.packed_products()
    forced = partial(teacher_forced_difference, network, steps, rows)
    tolerance = decoding_tolerance(network, rows)
    if not packed:
        return proven("fused_steps", network, forced, tolerance)
    path = "fused_steps+packed_weights"
    arithmetic = standing("fused_steps", network)
    if arithmetic is not None and arithmetic.proven:
        return proven(path, network, partial(packed_difference, packed, rows))
    if proven(path, network, forced, tolerance):
        imply("fused_steps", network, by=path)
        return True
    return False


@torch.no_grad()
def packed_difference(products: list[Product], rows: int) -> float:
    """The largest difference between each packed product and torch's public product of the
    same weight on a fixed input of `rows` rows, and of its `any` (the prompts' product, which
    may read the same packed copy) on `rows` + 3 rows, relative to the largest entry of the
    public product's output."""
    generator = torch.Generator().manual_seed(1234)
    largest = 0.0
    for product in products:
        weight = product.weight
        for count, run in ((rows, product), (rows + 3, product.any)):
            x = torch.randn(count, weight.size(1), generator=generator, dtype=weight.dtype)
            x = x.to(weight.device)
            plain = F.linear(x, weight, product.bias)
            scale = float(plain.abs().max()) or 1.0
            largest = max(largest, largest_difference(run(x), plain) / scale)
    return largest


def decoding_tolerance(network: nn.Module, rows: int) -> Callable[[], float] | None:
    """The tolerance of the decoding paths on `network`: None (the probe's `TOLERANCE`) in
    float32 and float64; in a half type the largest of `HALF_FACTOR` times what the modules'
    own cached decoding differs from their forward over the probe sequences, `FLOAT32_FACTOR`
    times what the half type's arithmetic moves that forward from float32's
    (`float32_rounding`), and `HALF_FLOOR`, measured once per kind of network. A fixed
    tolerance could not serve both a small network, whose rounding moves its log-probs by
    thousandths and a wrong step by tenths, and Gemma 3 270M, whose rounding moves them by
    tenths; nor can the modules' own reordering alone, which may move nothing at all."""
    if computed_dtype(network) not in (torch.bfloat16, torch.float16):
        return None

    def measured() -> float:
        modules = ModuleSteps(network, keeps_few_logits=False, make_room=False)
        own = partial(teacher_forced_difference, network, modules, rows)
        forward, compared = plain_probe(network, rows)
        return max(
            HALF_FLOOR,
            HALF_FACTOR * measured_per_kind("half_rounding", network, own),
            float32_yardstick("float32_rounding", network, forward, compared),
        )

    return measured


def plain_probe(network: nn.Module, rows: int) -> tuple[dict[str, Tensor], int]:
    """The forward that the decoding of the probe batch over `rows` rows is compared with: the
    whole sequences of its first and last row, without a cache (the arguments), and how many
    positions at their end are compared."""
    prompts = 2 if rows % 2 == 0 else 1
    group_size = rows // prompts
    prompt_ids, prompt_mask, fed = probe_input(network, prompts, group_size)
    count = fed.size(1)
    picked = sorted({0, rows - 1})  # the first row of the first prompt, the last of the last
    mask = prompt_mask.repeat_interleave(group_size, dim=0)[picked]
    mask = torch.cat([mask, mask.new_ones(len(picked), count - 1)], dim=1)
    prompt_rows = prompt_ids.repeat_interleave(group_size, dim=0)[picked]
    forward = {
        "input_ids": torch.cat([prompt_rows, fed[picked, :-1]], dim=1),
        "attention_mask": mask,
        "position_ids": position_ids(mask),
        "use_cache": False,
    }
    return forward, count


@torch.no_grad()
def teacher_forced_difference(network: nn.Module, steps: Steps, rows: int) -> float:
    """The largest difference, after log-softmax, between the logits of a probe batch
    decoded through `steps` (over `rows` rows, what they were built for) for three steps, the
    probe's tokens fed back, and those of one forward of the network over the same sequences
    without a cache (`plain_probe`), for the first and the last row."""
    prompts = 2 if rows % 2 == 0 else 1
    group_size = rows // prompts
    prompt_ids, prompt_mask, fed = probe_input(network, prompts, group_size)
    count = fed.size(1)
    mask = prompt_mask.repeat_interleave(group_size, dim=0)
    position = mask.sum(dim=1, keepdim=True)
    first = steps.prefill(prompt_ids, prompt_mask, group_size, count)
    fast = [first.repeat_interleave(group_size, dim=0)]
    for k in range(count - 1):
        fast.append(steps.step(fed[:, k], position + k))
    forward, compared = plain_probe(network, rows)
    plain = network(**forward).logits[:, -compared:]
    picked = sorted({0, rows - 1})
    return log_softmax_difference(torch.stack(fast, dim=1)[picked], plain)
