"""The float type a network stores and computes in, and the check that it gives numbers.

`model.dtype` names the precision the passes compute in. On the CPU a half type is kept
where it costs nothing to learning: the frozen weights (the base under a LoRA adapter) are
stored in it, while weights that are trained stay float32 (their master copies, so an update
smaller than the half type's rounding is not lost), and every forward runs under
`torch.autocast` in the half type (`computing`). Logits are widened to float32 before any
log-softmax, and the loss, the optimizer state and the rewards are float32 throughout
(docs/performance.md, "Precision").
"""

from __future__ import annotations

import contextlib
import logging
import statistics
import time
from collections.abc import Iterator
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

from src.utils import per_machine
from src.utils.errors import ConfigError

log = logging.getLogger(__name__)

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}
HALF_TYPES = frozenset({torch.bfloat16, torch.float16})
# `model.dtype`: bfloat16 where this machine computes it natively and faster, else float32
WHERE_FAST = "bfloat16_if_fast"
DTYPE_NAMES = (*DTYPES, WHERE_FAST)
# processor flags of native bfloat16 products (/proc/cpuinfo): Intel AMX, AVX512-BF16
NATIVE_BFLOAT16_FLAGS = ("amx_bf16", "avx512_bf16")
CHOICE = "bfloat16_products"  # the per-machine choice's name (`per_machine`)
ROUNDS = 7  # alternating rounds of the timing
FASTER_BY = 0.8  # bfloat16 is taken where its median time is at most this share of float32's
# rows x in -> out of the products timed: a decoding step's and a training pass's
TIMED_SHAPES = ((32, 1024, 4096), (1024, 1024, 4096))


def resolved_dtype(dtype: str, cpuinfo: Path = Path("/proc/cpuinfo")) -> str:
    """The dtype `model.dtype` names: itself, or for `bfloat16_if_fast` bfloat16 where the
    processor has native bfloat16 units (`NATIVE_BFLOAT16_FLAGS`, or a CUDA device that
    supports it) and a timing of its products shows it faster here (a per-machine choice,
    kept and recorded as the oneDNN ones are), float32 elsewhere; the run's log says which
    and why."""
    if dtype != WHERE_FAST:
        return dtype
    if torch.cuda.is_available() and torch.cuda.is_bf16_supported():
        return "bfloat16"
    if not native_bfloat16(cpuinfo):
        per_machine.record(CHOICE, False, "not timed: the processor has no bfloat16 units")
        log.info(
            "model.dtype=%s: float32, this processor has no native bfloat16 units (%s)",
            WHERE_FAST,
            ", ".join(NATIVE_BFLOAT16_FLAGS),
        )
        return "float32"
    faster = bool(per_machine.measured_once(CHOICE, timed_bfloat16))
    log.info(
        "model.dtype=%s: %s (bfloat16 products %s than float32 ones here)",
        WHERE_FAST,
        "bfloat16" if faster else "float32",
        "faster" if faster else "not enough faster",
    )
    return "bfloat16" if faster else "float32"


def native_bfloat16(cpuinfo: Path = Path("/proc/cpuinfo")) -> bool:
    """Whether the processor lists a native bfloat16 unit among its flags."""
    try:
        flags = per_machine.first_processor(cpuinfo.read_text()).get("flags", "").split()
    except OSError:
        return False
    return any(flag in flags for flag in NATIVE_BFLOAT16_FLAGS)


def timed_bfloat16() -> per_machine.Verdict:
    """float32 and bfloat16 products of `TIMED_SHAPES` taking turns over `ROUNDS` rounds:
    bfloat16 is chosen where the median of its time over float32's is at most `FASTER_BY`;
    clear (kept for the machine) when the machine was not busy and every round agrees."""
    busy = per_machine.machine_busy()
    generator = torch.Generator().manual_seed(0)
    operands = [
        (
            torch.randn(rows, width, generator=generator),
            torch.randn(out, width, generator=generator),
        )
        for rows, width, out in TIMED_SHAPES
    ]
    halves = [(x.bfloat16(), w.bfloat16()) for x, w in operands]
    times: dict[str, list[float]] = {"float32": [], "bfloat16": []}
    for turn in range(ROUNDS + 1):  # the first round warms both up
        order = [("float32", operands), ("bfloat16", halves)]
        for name, given in order if turn % 2 else reversed(order):
            start = time.perf_counter()
            for x, w in given:
                F.linear(x, w)
            times[name].append(time.perf_counter() - start)
    ratios = [h / f for h, f in zip(times["bfloat16"][1:], times["float32"][1:], strict=True)]
    faster = statistics.median(ratios) <= FASTER_BY
    agree = all((ratio <= FASTER_BY) == faster for ratio in ratios)
    doubt = f"the machine was busy ({busy})" if busy else "" if agree else "rounds disagree"
    timings = {name: statistics.median(seconds[1:]) for name, seconds in times.items()}
    return per_machine.Verdict(faster, not doubt, timings, doubt)


def stored_dtype(dtype: str, trains_every_weight: bool, device: str = "cpu") -> torch.dtype:
    """The dtype the weights are loaded in: `dtype`, except float32 for a half `dtype` on the
    CPU when the weights themselves are trained (no LoRA adapter over them): their master
    copies stay float32 and the forwards compute in `dtype` under autocast."""
    wanted = DTYPES[dtype]
    if wanted in HALF_TYPES and trains_every_weight and device == "cpu":
        return torch.float32
    return wanted


@contextlib.contextmanager
def computing(
    dtype: torch.dtype, device: torch.device, network: nn.Module | None = None
) -> Iterator[None]:
    """Within the block, products run in `dtype` when it is a half type (`torch.autocast`);
    nothing changes for float32 or float64. With `network` (a peft model), its LoRA layers
    meanwhile hand their input to the adapters as it is (peft's
    `disable_input_dtype_casting`): they would widen it to the float32 adapters' type, which
    autocast narrows again for the product, two copies of every activation the adapters read
    for the same numbers."""
    if dtype not in HALF_TYPES:
        yield
        return
    with contextlib.ExitStack() as stack:
        stack.enter_context(torch.autocast(device.type, dtype=dtype))
        if network is not None and hasattr(network, "disable_adapter"):
            from peft.helpers import disable_input_dtype_casting

            stack.enter_context(disable_input_dtype_casting(network))
        yield


def with_contiguous_head(network: nn.Module) -> nn.Module:
    """`network` with its output projection taking a contiguous copy of a strided input (a
    hook, kept for the network's life): transformers hands the head the last positions as a
    slice of the hidden states, and a linear layer given a strided 3-D input multiplies it
    through `bmm` with its weight expanded once per row, which for a 262k-entry vocabulary
    copies gigabytes (18 s for 8 rows of Gemma 3 in bfloat16, where no oneDNN route takes
    the product first). A contiguous input goes through one matrix product; nothing changes
    for one that is contiguous already."""
    head = network.get_output_embeddings() if hasattr(network, "get_output_embeddings") else None
    if isinstance(head, nn.Module):
        head.register_forward_pre_hook(_contiguous_input)
    return network


def _contiguous_input(module: nn.Module, args: tuple) -> tuple | None:
    if args and isinstance(args[0], torch.Tensor) and not args[0].is_contiguous():
        return (args[0].contiguous(), *args[1:])
    return None


def check_finite_forward(network: nn.Module, dtype: str, name: str) -> None:
    """One line naming `model.dtype` when `network`'s forward over a few tokens (the model's
    BOS first, where it has one) gives a NaN or an infinite logit in the precision it
    computes in (float16 activations overflow in some models): refused before anything is
    trained or sampled, never run on empty completions."""
    parameter = next(network.parameters())
    vocab = network.get_input_embeddings().num_embeddings
    ids = torch.arange(8, device=parameter.device) * 7919 % vocab
    bos = getattr(getattr(network, "config", None), "bos_token_id", None)
    if isinstance(bos, int) and 0 <= bos < vocab:  # what prompts start with (Gemma's
        ids[0] = bos  # activations on it are the ones that overflow float16)
    ids = ids.unsqueeze(0)
    was_training = network.training
    network.eval()
    try:
        with torch.no_grad(), computing(DTYPES[dtype], parameter.device):
            logits = network(input_ids=ids).logits
    finally:
        network.train(was_training)
    if bool(logits.isfinite().all()):
        return
    others = ", ".join(other for other in DTYPES if other != dtype)
    raise ConfigError(
        f"model.dtype={dtype}: {name} gives NaN or infinite logits in {dtype} on "
        f"{parameter.device.type} (its activations overflow the type): set model.dtype to "
        f"another type ({others})"
    )
