"""Fast path `onednn_products`: the float32 products of linear layers through oneDNN.

On the CPU, torch's `F.linear` multiplies float32 through MKL's sgemm. On some processors
(MKL keeps its AVX-512 code for Intel's) a private torch op, `torch.ops.mkldnn._linear_pointwise`,
computes the same product through oneDNN in about half the time, at every size a step
multiplies: a few rows while decoding, thousands in the log-prob forwards
(`docs/performance.md`). The op is private and has no backward of its own, so:

- it is used only where `faster_here()` finds it clearly faster than `F.linear` on this
  machine (timed on the step's forward products, and kept once per machine only when the
  timings are clear and the machine was not busy, `src.utils.per_machine`, so every process
  there rounds alike), so a CPU where MKL is quick keeps MKL; the gradients' products go
  through oneDNN only where `gradients_faster_here()` says so too;
- decoding reads it through `src.model.fast.packed` (`packed_product`), under the probes of
  the packed paths there;
- the log-prob forwards read it through `onednn_linears`, which routes every float32 CPU
  `nn.Linear` of the network through `linear` (this module's autograd function: the input's
  and the weight's gradients are oneDNN products too) once `check_onednn_products` has found
  its outputs and gradients equal to the layers' own for every distinct weight shape.
"""

from __future__ import annotations

import contextlib
import logging
import statistics
import time
from collections.abc import Iterator
from functools import partial
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from src.model.fast.probe import largest_difference, proven, turned_off
from src.utils.per_machine import Verdict, machine_busy, measured_once

log = logging.getLogger(__name__)

PATH = "onednn_products"
FASTER_BY = 0.9  # oneDNN is used where it takes at most this share of F.linear's time

_faster: list[bool] = []  # the machine's timing verdict, once this process has read it
_gradients_faster: list[bool] = []  # the same for the gradients' products
GRADIENTS = "onednn_gradients"  # the per-machine name of the gradients' verdict


def available() -> bool:
    """Whether this torch build has oneDNN and its linear op."""
    return torch.backends.mkldnn.is_available() and hasattr(torch.ops.mkldnn, "_linear_pointwise")


def usable() -> bool:
    """Whether the products may go through oneDNN in this process: available, not turned off
    by $GRPO_FAST_PATHS_OFF, and faster than MKL here."""
    return available() and not turned_off(PATH) and faster_here()


def product(x: Tensor, weight: Tensor, bias: Tensor | None = None) -> Tensor:
    """x @ weight.T + bias through oneDNN, no gradient (float32 CPU tensors)."""
    return torch.ops.mkldnn._linear_pointwise(x, weight, bias, "none", [], "")


def faster_here() -> bool:
    """Whether oneDNN's products beat `F.linear`'s on this machine by `FASTER_BY`, timed on
    the shapes a step multiplies (`SHAPES`), taking turns over `ROUNDS` rounds; any failure
    of the op counts as not faster. A clear verdict is kept for the machine (`measured_once`:
    a verdict timed in each process could differ between two runs of one seed, or a run and
    its continuation, whose sums would then round differently); one timed while the machine
    was busy, or whose rounds fall on both sides of `FASTER_BY`, holds for this process only
    and the next one times again."""
    if not _faster:
        _faster.append(bool(measured_once(PATH, _time_both)))
    return _faster[0]


def gradients_faster_here() -> bool:
    """Whether oneDNN also beats torch's products for a linear layer's gradients (grad @ W and
    grad^T @ x over training rows), decided as `faster_here` is, on those products alone: on
    some CPUs oneDNN's forward wins and its backward does not. Where it does not, the routed
    layers' gradients are torch's own products."""
    if not _gradients_faster:
        timing = partial(_time_both, gradients=True)
        _gradients_faster.append(bool(measured_once(GRADIENTS, timing)))
    return _gradients_faster[0]


def forget_verdicts() -> None:
    """This process's answers dropped, so that the next question reads or times them again
    (`benchmarks/fast_paths.py --retime`, after `per_machine.forget`)."""
    _faster.clear()
    _gradients_faster.clear()


# the per-machine choices this module makes, by name
VERDICTS = {PATH: faster_here, GRADIENTS: gradients_faster_here}


# rows x in -> out: decoding rows (a batch's B * G) and a chunk of training rows, at SmolLM2's
# widths (576 -> 1536) and Gemma 3 270M's (640 -> 2048)
SHAPES = ((32, 576, 1536), (1024, 576, 1536), (32, 640, 2048), (1024, 640, 2048))
TRAINING_ROWS = 1024  # the gradients' verdict times these shapes' grad @ W and grad^T @ x
ROUNDS = 9  # alternating rounds; the verdict is clear when their middle 60% agree
clock = time.perf_counter  # what the timings read


def _time_both(rounds: int = ROUNDS, gradients: bool = False) -> Verdict:
    """Both products' time over `SHAPES`, per round, taking turns; the verdict, clear when the
    machine is not busy and the 20th and 80th percentiles of the rounds' oneDNN / MKL ratios
    lie on one side of `FASTER_BY`."""
    if not available():
        return Verdict(False, True)
    busy = machine_busy()
    generator = torch.Generator().manual_seed(1234)
    operands = [
        (
            torch.randn(rows, width, generator=generator),
            torch.randn(out, width, generator=generator),
            torch.randn(rows, out, generator=generator) if gradients else None,
        )
        for rows, width, out in SHAPES
        if rows >= TRAINING_ROWS or not gradients
    ]
    kernels = {"mkl": _mkl_products, "onednn": _onednn_products}
    times: dict[str, list[float]] = {"mkl": [], "onednn": []}
    try:
        for turn in range(rounds + 1):
            order = list(kernels) if turn % 2 else list(reversed(kernels))
            for name in order:
                start = clock()
                for x, weight, grad in operands:
                    kernels[name](x, weight, grad)
                elapsed = clock() - start
                if turn:  # the first round warms both up
                    times[name].append(elapsed)
    except Exception as exc:  # a build whose op is broken: the products stay on MKL
        log.info("oneDNN products left out: %s: %s", type(exc).__name__, exc)
        return Verdict(False, True)
    ratios = sorted(o / m for o, m in zip(times["onednn"], times["mkl"], strict=True))
    low, high = ratios[len(ratios) // 5], ratios[-1 - len(ratios) // 5]
    mkl, onednn = (statistics.median(times[name]) for name in ("mkl", "onednn"))
    faster = statistics.median(ratios) <= FASTER_BY
    doubt = (
        f"the machine was busy ({busy})"
        if busy
        else f"the rounds' oneDNN / MKL ratios {low:.2f}-{high:.2f} straddle {FASTER_BY}"
        if low <= FASTER_BY <= high
        else ""
    )
    log.info(
        "oneDNN %s %.0f us, MKL %.0f us: they %s%s",
        "gradient products" if gradients else "products",
        1e6 * onednn,
        1e6 * mkl,
        "go through oneDNN where proven" if faster else "stay on MKL",
        f" (for this process only: {doubt})" if doubt else "",
    )
    return Verdict(faster, not doubt, {"mkl": mkl, "onednn": onednn}, doubt)


def _mkl_products(x: Tensor, weight: Tensor, grad: Tensor | None) -> None:
    """A linear layer's products as torch runs them (MKL on the CPU): the forward, or with
    `grad` both gradients."""
    if grad is None:
        F.linear(x, weight)
    else:
        grad @ weight
        grad.t() @ x


def _onednn_products(x: Tensor, weight: Tensor, grad: Tensor | None) -> None:
    """The same products as `OnednnLinear` runs them through oneDNN."""
    if grad is None:
        product(x, weight)
    else:
        input_grad(grad, weight)
        weight_grad(grad, x)


class OnednnLinear(torch.autograd.Function):
    """F.linear(x, weight, bias) with the product and both gradients' products through
    oneDNN: grad_x = g @ W, grad_W = g^T @ x, grad_b = sum of g over rows."""

    @staticmethod
    def forward(ctx: Any, x: Tensor, weight: Tensor, bias: Tensor | None) -> Tensor:
        ctx.save_for_backward(x, weight)
        ctx.has_bias = bias is not None
        return product(x, weight, bias)

    @staticmethod
    def backward(ctx: Any, grad: Tensor) -> tuple[Tensor | None, ...]:
        x, weight = ctx.saved_tensors
        grad_x = grad_weight = grad_bias = None
        through_onednn = gradients_faster_here()  # else torch's own products (MKL)
        if ctx.needs_input_grad[0]:
            grad_x = input_grad(grad, weight) if through_onednn else grad @ weight
        flat = grad.reshape(-1, grad.size(-1))
        if ctx.needs_input_grad[1]:
            rows = x.reshape(-1, x.size(-1))
            grad_weight = weight_grad(flat, rows) if through_onednn else flat.t() @ rows
        if ctx.has_bias and ctx.needs_input_grad[2]:
            grad_bias = flat.sum(0)
        return grad_x, grad_weight, grad_bias


def input_grad(grad: Tensor, weight: Tensor) -> Tensor:
    """grad @ weight through oneDNN: the input's gradient of a linear layer."""
    return product(grad, weight.t().contiguous())


def weight_grad(grad: Tensor, x: Tensor) -> Tensor:
    """grad^T @ x through oneDNN, for `grad` [rows, out] and `x` [rows, in]: the weight's
    gradient of a linear layer."""
    return product(grad.t().contiguous(), x.t().contiguous())


def is_routed(module: nn.Module) -> bool:
    """Whether `module` multiplies through oneDNN now (inside `onednn_linears`)."""
    forward = module.__dict__.get("forward")
    return isinstance(forward, partial) and forward.func is _forward


def linear(x: Tensor, weight: Tensor, bias: Tensor | None = None) -> Tensor:
    """F.linear through oneDNN, with gradients where autograd needs them."""
    if torch.is_grad_enabled() and (
        x.requires_grad or weight.requires_grad or (bias is not None and bias.requires_grad)
    ):
        return OnednnLinear.apply(x, weight, bias)
    return product(x, weight, bias)


def _routable(module: nn.Module) -> bool:
    weight = getattr(module, "weight", None)
    return (
        type(module) is nn.Linear
        and weight is not None
        and weight.dtype == torch.float32
        and weight.device.type == "cpu"
        and "forward" not in module.__dict__  # a hook's or another path's wrapper: left alone
    )


@contextlib.contextmanager
def onednn_linears(network: nn.Module, enabled: bool = True) -> Iterator[int]:
    """Within the block, every float32 CPU `nn.Linear` of `network` (LoRA's base layers
    included) multiplies through oneDNN, where that is `usable()` and proven on this network;
    otherwise nothing changes. Yields how many layers were routed."""
    if not (enabled and usable()):
        yield 0
        return
    targets = [module for module in network.modules() if _routable(module)]
    # a network that trains some of these weights has their gradients checked too (a frozen
    # copy of the same kind of network, the KL reference, does not prove those)
    path = f"{PATH}+weight_grads" if any(m.weight.requires_grad for m in targets) else PATH
    if not targets or not proven(path, network, partial(check_onednn_products, network)):
        yield 0
        return
    with routed(targets) as count:
        yield count


@contextlib.contextmanager
def routed(targets: list[nn.Module]) -> Iterator[int]:
    """The routing itself, unprobed (the probe and tests use it)."""
    try:
        for module in targets:
            module.forward = partial(_forward, module)
        yield len(targets)
    finally:
        for module in targets:
            module.__dict__.pop("forward", None)


def _forward(module: nn.Linear, x: Tensor) -> Tensor:
    return linear(x, module.weight, module.bias)


def check_onednn_products(network: nn.Module) -> float:
    """The largest difference between `linear` and `F.linear` (what `nn.Linear` runs), for
    the first `nn.Linear` of each distinct weight shape: the output relative to its largest
    entry, and the gradients with respect to the input and, where a layer of that shape
    trains its weight, the weight's, each relative to its largest entry; for a fixed input
    of 2 x 3 positions."""
    firsts: dict[tuple[int, int, bool], nn.Linear] = {}
    trains: dict[tuple[int, int, bool], bool] = {}
    for module in network.modules():
        if _routable(module):
            shape = (*module.weight.shape, module.bias is not None)
            firsts.setdefault(shape, module)
            trains[shape] = trains.get(shape, False) or module.weight.requires_grad
    generator = torch.Generator().manual_seed(1234)
    difference = 0.0
    for shape, module in firsts.items():
        with torch.inference_mode(False):  # normal tensors, whatever mode the caller is in
            x = torch.randn(2, 3, module.in_features, generator=generator)
            weight = module.weight.detach()
            if trains[shape]:
                weight = weight.clone().requires_grad_()
        results = []
        for run in (F.linear, linear):
            # gradients even when the first use is under no_grad or inference mode (validation)
            with torch.inference_mode(False), torch.enable_grad():
                inputs = x.clone().requires_grad_()
                out = run(inputs, weight, module.bias)
                scales = torch.linspace(-1.0, 1.0, out.numel()).view_as(out)
                leaves = [inputs, weight] if trains[shape] else [inputs]
                grads = torch.autograd.grad((out * scales).sum(), leaves)
            results.append((out.detach(), *grads))
        own, fast = results
        for plain, quick in zip(own, fast, strict=True):
            scale = float(plain.abs().max()) or 1.0
            difference = max(difference, largest_difference(quick, plain) / scale)
    return difference
