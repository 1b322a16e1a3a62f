"""Fast path `onednn_products`: the float32 products of linear layers through oneDNN.

On the CPU, torch's `F.linear` multiplies float32 through MKL's sgemm. On some processors
(MKL keeps its AVX-512 code for Intel's) a private torch op, `torch.ops.mkldnn._linear_pointwise`,
computes the same product through oneDNN in about half the time, at every size a step
multiplies: a few rows while decoding, thousands in the log-prob forwards
(`docs/performance.md`). The op is private and has no backward of its own, so:

- it is used only where `faster_here` finds it clearly faster than torch's product on this
  machine at the network's own widths (`widths_of`: a transformer's hidden -> MLP width),
  with a verdict for each kind of product a step makes: the log-prob passes' forward
  products (`PATH`), decoding's products of a few rows (`DECODING`) and the passes' gradients'
  products (`GRADIENTS`), the passes' two at the rows of the pass that asks (`pass_rows`).
  Each is timed on those rows at those widths and kept once per machine, widths and rows
  only when its timings are clear and the machine was not busy
  (`src.utils.per_machine`), so every process there rounds alike; so a CPU or a model size
  where MKL is quick keeps MKL;
- decoding reads it through `src.model.fast.packed` (`packed_product`), under the probes of
  the packed paths there, where `usable(widths, DECODING)`, on copies of the weights reordered
  once into oneDNN's own layout (`prepacked`): given a plain weight, oneDNN reorders it on
  every call, which for a few rows costs about as much as the product. bfloat16 weights are
  decoded so too where `HALF_DECODING` says oneDNN's product of a reordered copy beats
  torch's bfloat16 product (itself oneDNN's, reordering the weight on every call);
- the log-prob forwards read it through `onednn_linears`, which routes every float32 CPU
  `nn.Linear` of the network through `linear` (this module's autograd function: the input's
  and the weight's gradients are oneDNN products too where `GRADIENTS` says so) once
  `check_onednn_products` has found its outputs and gradients equal to the layers' own for
  every distinct weight shape.
"""

from __future__ import annotations

import contextlib
import logging
import math
import statistics
import time
from collections import Counter
from collections.abc import Callable, Iterator
from functools import partial
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from src.model.fast.probe import largest_difference, proven, turned_off
from src.utils.per_machine import Verdict, machine_busy, measured_once

log = logging.getLogger(__name__)

PATH = "onednn_products"  # the fast path ($GRPO_FAST_PATHS_OFF); the log-prob forwards' verdict
# the verdict of decoding's products (a few rows each, through weights `prepacked` once)
DECODING = "onednn_packed_decoding"
# the same for bfloat16 weights: a reordered copy against torch's bfloat16 product
HALF_DECODING = "onednn_packed_decoding_bf16"
GRADIENTS = "onednn_gradients"  # the verdict of the log-prob passes' gradients' products
FASTER_BY = 0.9  # oneDNN is used where it takes at most this share of F.linear's time

# a network's own widths: the in and out features of its weightiest recurring linear shape
Widths = tuple[int, int]

_answers: dict[str, bool] = {}  # this process's verdicts, by per-machine name, once read


def available() -> bool:
    """Whether this torch build has oneDNN and its linear op."""
    return torch.backends.mkldnn.is_available() and hasattr(torch.ops.mkldnn, "_linear_pointwise")


def widths_of(network: nn.Module) -> Widths | None:
    """The widths a verdict is timed at for `network`: (in, out) features of the `nn.Linear`
    weight shape that holds the most weights among the shapes that recur (a model's layers
    repeat; its vocabulary head occurs once), i.e. a transformer's hidden -> MLP width; of all
    shapes where none recurs; None without linear layers. Reads shapes only (any device)."""
    weights: Counter[Widths] = Counter()
    layers: Counter[Widths] = Counter()
    for module in network.modules():
        if type(module) is nn.Linear:
            shape = (module.in_features, module.out_features)
            weights[shape] += module.in_features * module.out_features
            layers[shape] += 1
    recurring = {shape: total for shape, total in weights.items() if layers[shape] > 1}
    candidates = recurring or dict(weights)
    return max(candidates, key=lambda shape: (candidates[shape], shape), default=None)


def usable(widths: Widths | None, verdict: str = PATH, rows: int | None = None) -> bool:
    """Whether a network of these widths (`widths_of`) may take oneDNN's products in this
    process, where `verdict` (`PATH` for the log-prob forwards, `DECODING` for decoding's)
    decides: available, not turned off by $GRPO_FAST_PATHS_OFF=onednn_products, and faster
    than MKL here at those widths and rows (`faster_here`; `rows`: a pass's, `pass_rows`)."""
    return (
        widths is not None
        and available()
        and not turned_off(PATH)
        and faster_here(widths, verdict, rows)
    )


def product(x: Tensor, weight: Tensor, bias: Tensor | None = None) -> Tensor:
    """x @ weight.T + bias through oneDNN, no gradient (float32 CPU tensors; `weight` plain or
    `prepacked`)."""
    return torch.ops.mkldnn._linear_pointwise(x, weight, bias, "none", [], "")


def prepacked(weight: Tensor, rows: int | None = None) -> Tensor:
    """`weight` reordered once into oneDNN's own layout for products of about `rows` rows (an
    opaque oneDNN tensor), which `product` takes in place of the weight. Given a plain weight,
    oneDNN reorders it on every call; for a few rows that costs about as much as the product,
    so decoding, which multiplies the same weights once per token, reorders them once."""
    return torch.ops.mkldnn._reorder_linear_weight(weight.detach().contiguous(), rows)


def pass_rows(tokens: int) -> int:
    """The rows a log-prob pass of `tokens` tokens is timed at: `TRAINING_ROWS` times the power
    of two nearest to tokens / `TRAINING_ROWS` (on a log scale), from 1 up to
    `MOST_TRAINING_ROWS`. A product's speed on either kernel changes with its rows (at the tiny
    Llama's widths oneDNN's lead over MKL grows from 1024 rows to 4096, docs/performance.md),
    so the verdict is timed near the rows the pass multiplies, in few enough sizes that each is
    timed once per machine."""
    ratio = max(tokens, 1) / TRAINING_ROWS
    return min(MOST_TRAINING_ROWS, TRAINING_ROWS * 2 ** max(0, round(math.log2(ratio))))


def verdict_name(verdict: str, widths: Widths, rows: int | None = None) -> str:
    """The per-machine name of `verdict` at `widths`: `onednn_products.576x1536`, and where
    timed at other `rows` than the verdict's own (`ROWS`), those too:
    `onednn_products.128x512.rows4096`."""
    name = f"{verdict}.{widths[0]}x{widths[1]}"
    return name if rows is None or rows == ROWS[verdict] else f"{name}.rows{rows}"


def faster_here(widths: Widths, verdict: str = PATH, rows: int | None = None) -> bool:
    """Whether oneDNN's products beat torch's on this machine by `FASTER_BY` at `widths`, for
    `verdict`: `PATH`, the forward products of the log-prob passes' rows; `DECODING`, those of
    decoding's few rows, where a product's fixed cost weighs most; `GRADIENTS`, a linear
    layer's two gradients' products (grad @ W and grad^T @ x) over the passes' rows, which on
    some CPUs lose where the forward wins. Timed on the products a step multiplies there
    (`shapes_at`), taking turns over `ROUNDS` rounds; any failure of the op counts as not
    faster. A clear verdict is kept for the machine and widths (`measured_once`: a verdict
    timed in each process could differ between two runs of one seed, or a run and its
    continuation, whose sums would then round differently); one timed while the machine was
    busy, or whose rounds leave it in doubt (`_time_both`), holds for this process only and
    the next one times again. `rows`: the passes' rows the verdict is timed at (`pass_rows`;
    its own `ROWS` by default), each kept under a name of its own."""
    name = verdict_name(verdict, widths, rows)
    if name not in _answers:
        _answers[name] = bool(measured_once(name, partial(_time_both, widths, verdict, rows)))
    return _answers[name]


def take(verdict: str, widths: Widths, value: bool, rows: int | None = None) -> None:
    """This process takes `value` as `verdict`'s answer at `widths` (and `rows`), whatever this
    machine's timing says, until `forget_verdicts` (a benchmark comparing both kernels in one
    process, `benchmarks/decoding_products.py`); nothing is kept."""
    _answers[verdict_name(verdict, widths, rows)] = value


def ask_all(
    widths: Widths | None, rows: int | None = None, dtype: torch.dtype = torch.float32
) -> None:
    """Ask every verdict a run of a network of these widths asks, in the order it asks them:
    the log-prob forwards' (`onednn_linears`) at the passes' `rows` (`pass_rows`), their
    gradients' where those go through oneDNN, then decoding's in `dtype` (`decoding_verdict`,
    `src.model.fast.packed.decodes_through_onednn`). What `choices()` then holds is what
    such a run will take (`benchmarks/vs_trl.py` reports them)."""
    if usable(widths, PATH, rows):
        faster_here(widths, GRADIENTS, rows)
    usable(widths, decoding_verdict(dtype))


def decoding_verdict(dtype: torch.dtype) -> str:
    """The verdict that decides whether decoding's products of weights of `dtype` go through
    reordered copies: `HALF_DECODING` for bfloat16, `DECODING` for anything else."""
    return HALF_DECODING if dtype == torch.bfloat16 else DECODING


def decider(name: str) -> Callable[[], bool] | None:
    """What decides the verdict a per-machine `name` holds (one `verdict_name` made), or None
    for any other name (`benchmarks/fast_paths.py --retime`)."""
    verdict, _, timed = name.partition(".")
    shape, at, rows = timed.partition(".rows")
    hidden, _, out = shape.partition("x")
    sizes_given = hidden.isdigit() and out.isdigit() and (not at or rows.isdigit())
    if verdict not in ROWS or not sizes_given:
        return None
    return partial(faster_here, (int(hidden), int(out)), verdict, int(rows) if at else None)


def forget_verdicts() -> None:
    """This process's answers dropped, so that the next question reads or times them again
    (`benchmarks/fast_paths.py --retime`, after `per_machine.forget`)."""
    _answers.clear()


DECODING_ROWS = 32  # a batch's B * G rows, one new token each
TRAINING_ROWS = 1024  # a log-prob pass's rows, at the fewest (`pass_rows`)
MOST_TRAINING_ROWS = 8192  # a log-prob pass's rows, at the most (`pass_rows`)
# the rows each verdict is timed at
ROWS = {
    PATH: TRAINING_ROWS,
    DECODING: DECODING_ROWS,
    HALF_DECODING: DECODING_ROWS,
    GRADIENTS: TRAINING_ROWS,
}
DTYPES = {HALF_DECODING: torch.bfloat16}  # the verdicts timed in another type than float32
WORK = 4e9  # floating-point operations a round multiplies at least (small products repeat)
ROUNDS = 9  # alternating rounds timed first
MOST_ROUNDS = 27  # timed in all where the first rounds leave the verdict in doubt
CLOSE = 0.1  # median's bounds this close about FASTER_BY: either choice costs little, kept
DECODED_BYTES = 64 * 2**20  # decoding's verdict reads at least this many weight bytes in turn
clock = time.perf_counter  # what the timings read


def weight_copies(shapes: list[tuple[int, int, int]], element_size: int = 4) -> int:
    """How many distinct copies of the weights of `shapes` (rows x in -> out) hold at least
    `DECODED_BYTES` of `element_size`-byte numbers: decoding's verdicts multiply each copy in
    turn, so its weights
    come from memory as a decoding step's do (it reads every weight of the network once), not
    from the caches a repeated product keeps them in. On the AMD EPYC of docs/performance.md
    that is where oneDNN's reordered weights gain most at small widths."""
    weights = sum(width * out for _, width, out in shapes)
    return max(1, math.ceil(DECODED_BYTES / (element_size * weights)))


def shapes_at(
    widths: Widths, verdict: str = PATH, rows: int | None = None
) -> list[tuple[int, int, int]]:
    """rows x in -> out of the products `verdict` times at `widths`: in -> out and back, as an
    MLP's up and down projections, at `rows` (the verdict's `ROWS` by default)."""
    hidden, out = widths
    rows = rows or ROWS[verdict]
    return [(rows, hidden, out), (rows, out, hidden)]


def _time_both(widths: Widths, verdict: str = PATH, rows: int | None = None) -> Verdict:
    """Both kernels' time over `_operands(widths, verdict)`, repeated to `WORK`, per round,
    taking turns over `ROUNDS` rounds, and up to `MOST_ROUNDS` where the median's bounds
    (`median_bounds`) of the rounds' oneDNN / MKL ratios still straddle `FASTER_BY`; the
    verdict, from the median ratio. It is clear when the machine was not busy and those
    bounds lie on one side of `FASTER_BY`, or within `CLOSE` of each other: there the two
    kernels differ by about `FASTER_BY` and either choice costs little, so an answer every
    process shares is worth more."""
    if not available():
        return Verdict(False, True)
    busy = machine_busy()
    times: dict[str, list[float]] = {"mkl": [], "onednn": []}

    def undecided(bounds: tuple[float, float]) -> bool:
        low, high = bounds
        return low <= FASTER_BY <= high and high - low > CLOSE

    try:
        given, flops, copies = _operands(widths, verdict, rows)
        timed = partial(_timed_rounds, times, given, max(1, math.ceil(WORK / flops)), copies)
        ratios = timed(1 + ROUNDS)  # the first round warms both up
        if not busy and undecided(median_bounds(ratios)):
            ratios = timed(MOST_ROUNDS - ROUNDS)
    except Exception as exc:  # a build whose op is broken: the products stay on MKL
        log.info("oneDNN products left out: %s: %s", type(exc).__name__, exc)
        return Verdict(False, True)
    mkl, onednn = (statistics.median(times[name][1:]) for name in ("mkl", "onednn"))
    faster = statistics.median(ratios) <= FASTER_BY
    bounds = median_bounds(ratios)
    doubt = (
        f"the machine was busy ({busy})"
        if busy
        else f"the median oneDNN / MKL ratio of {len(ratios)} rounds lies within "
        f"{bounds[0]:.2f}-{bounds[1]:.2f}, about {FASTER_BY}"
        if undecided(bounds)
        else ""
    )
    log.info(
        "%s at %dx%d, %d rows: oneDNN %.0f us, torch's product %.0f us: they %s%s",
        verdict,
        *widths,
        shapes_at(widths, verdict, rows)[0][0],
        1e6 * onednn,
        1e6 * mkl,
        "go through oneDNN where proven" if faster else "stay on torch's",
        f" (for this process only: {doubt})" if doubt else "",
    )
    return Verdict(faster, not doubt, {"mkl": mkl, "onednn": onednn}, doubt)


# a product's operands: its input, its weight (plain or `prepacked`), and for the gradients'
# products the output's gradient
Operands = tuple[Tensor, Tensor, Tensor | None]


def _timed_rounds(
    times: dict[str, list[float]],
    given: dict[str, list[Operands]],
    repeats: int,
    copies: int,
    count: int,
) -> list[float]:
    """`count` more rounds of `_time_both`, the two kernels taking turns (which goes first
    alternates), each multiplying its `given` operands `repeats` times; every round's time per
    copy appended to `times`. Returns every round's oneDNN / MKL ratio so far, the first
    (warm-up) round left out."""
    kernels = {"mkl": _mkl_products, "onednn": _onednn_products}
    for _ in range(count):
        turn = len(times["mkl"])
        for name in list(kernels) if turn % 2 else list(reversed(kernels)):
            start = clock()
            for _ in range(repeats):
                for x, weight, grad in given[name]:
                    kernels[name](x, weight, grad)
            times[name].append((clock() - start) / (repeats * copies))
    return [o / m for o, m in zip(times["onednn"][1:], times["mkl"][1:], strict=True)]


def _operands(
    widths: Widths, verdict: str, rows: int | None = None
) -> tuple[dict[str, list[Operands]], float, int]:
    """Each kernel's operands for `verdict` at `widths`, as it gets them: those of
    `shapes_at(widths, verdict, rows)` (with the outputs' gradients for `GRADIENTS`), in the
    verdict's type (`DTYPES`, float32 by default); for the decoding verdicts, `weight_copies`
    distinct weights in turn, oneDNN's reordered once, as decoding multiplies them. Also the
    floating-point operations of one pass over them, and the copies a pass holds (the timings
    are per copy)."""
    generator = torch.Generator().manual_seed(1234)
    gradients = verdict == GRADIENTS
    decoding = verdict in (DECODING, HALF_DECODING)
    dtype = DTYPES.get(verdict, torch.float32)
    shapes = shapes_at(widths, verdict, rows)
    copies = weight_copies(shapes, dtype.itemsize) if decoding else 1
    operands = [
        (
            torch.randn(rows, width, generator=generator).to(dtype),
            torch.randn(out, width, generator=generator).to(dtype),
            torch.randn(rows, out, generator=generator) if gradients else None,
        )
        for _ in range(copies)
        for rows, width, out in shapes
    ]
    given = {"mkl": operands, "onednn": operands}
    if decoding:
        given["onednn"] = [(x, prepacked(w, x.size(0)), g) for x, w, g in operands]
    flops = sum(2 * rows * width * out for rows, width, out in shapes) * (2 if gradients else 1)
    return given, flops * copies, copies


def median_bounds(values: list[float], level: float = 0.9) -> tuple[float, float]:
    """Bounds within which the median of the distribution `values` were drawn from lies with
    probability at least `level`: the k-th smallest and the k-th largest of them, for the
    largest k whose two tails (each a binomial(n, 1/2) count of at most k - 1 values below the
    median) together stay within 1 - `level`. 9 values: the 2nd and the 8th; 27: the 9th and
    the 19th."""
    ordered = sorted(values)
    n = len(ordered)
    below = 0  # how many values lie outside the bounds on each side
    while below + 1 < n - below - 1 and 2 * _binomial_tail(below + 1, n) <= 1 - level:
        below += 1
    return ordered[below], ordered[n - 1 - below]


def _binomial_tail(k: int, n: int) -> float:
    """P(X <= k) for X ~ binomial(n, 1/2)."""
    return sum(math.comb(n, i) for i in range(k + 1)) / 2**n


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
    """F.linear(x, weight, bias) with the product through oneDNN, and where `gradients` both
    gradients' products too (else torch's own): grad_x = g @ W, grad_W = g^T @ x, grad_b =
    sum of g over rows."""

    @staticmethod
    def forward(
        ctx: Any, x: Tensor, weight: Tensor, bias: Tensor | None, gradients: bool
    ) -> Tensor:
        ctx.save_for_backward(x, weight)
        ctx.has_bias = bias is not None
        ctx.gradients = gradients
        return product(x, weight, bias)

    @staticmethod
    def backward(ctx: Any, grad: Tensor) -> tuple[Tensor | None, ...]:
        x, weight = ctx.saved_tensors
        grad_x = grad_weight = grad_bias = None
        through_onednn = ctx.gradients  # else torch's own products (MKL)
        if ctx.needs_input_grad[0]:
            grad_x = input_grad(grad, weight) if through_onednn else grad @ weight
        flat = grad.reshape(-1, grad.size(-1))
        if ctx.needs_input_grad[1]:
            rows = x.reshape(-1, x.size(-1))
            grad_weight = weight_grad(flat, rows) if through_onednn else flat.t() @ rows
        if ctx.has_bias and ctx.needs_input_grad[2]:
            grad_bias = flat.sum(0)
        return grad_x, grad_weight, grad_bias, None


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


def routes_gradients(module: nn.Module) -> bool:
    """Whether `module` is routed and its gradients' products go through oneDNN too."""
    return is_routed(module) and bool(module.__dict__["forward"].keywords["gradients"])


def linear(x: Tensor, weight: Tensor, bias: Tensor | None = None, gradients: bool = True) -> Tensor:
    """F.linear through oneDNN, with gradients where autograd needs them (their products
    through oneDNN where `gradients`, else torch's own)."""
    if torch.is_grad_enabled() and (
        x.requires_grad or weight.requires_grad or (bias is not None and bias.requires_grad)
    ):
        return OnednnLinear.apply(x, weight, bias, gradients)
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
def onednn_linears(
    network: nn.Module, enabled: bool = True, tokens: int | None = None
) -> Iterator[int]:
    """Within the block, every float32 CPU `nn.Linear` of `network` (LoRA's base layers
    included) multiplies through oneDNN, where that is `usable` at the network's widths and
    proven on this network, its gradients' products too where `faster_here` says so for
    `GRADIENTS` at those widths; otherwise nothing changes. Both verdicts are timed at the rows
    of a pass of `tokens` tokens (`pass_rows`; `TRAINING_ROWS` where not given). Yields how
    many layers were routed."""
    widths = widths_of(network) if enabled else None  # no walk over the modules when not
    rows = None if tokens is None else pass_rows(tokens)
    if not usable(widths, PATH, rows):
        yield 0
        return
    targets = [module for module in network.modules() if _routable(module)]
    # a network that trains some of these weights has their gradients checked too (a frozen
    # copy of the same kind of network, the KL reference, does not prove those)
    path = f"{PATH}+weight_grads" if any(m.weight.requires_grad for m in targets) else PATH
    if not targets or not proven(path, network, partial(check_onednn_products, network)):
        yield 0
        return
    with routed(targets, faster_here(widths, GRADIENTS, rows)) as count:
        yield count


@contextlib.contextmanager
def routed(targets: list[nn.Module], gradients: bool = True) -> Iterator[int]:
    """The routing itself, unprobed (the probe and tests use it); the gradients' products
    through oneDNN too where `gradients`."""
    try:
        for module in targets:
            module.forward = partial(_forward, module, gradients=gradients)
        yield len(targets)
    finally:
        for module in targets:
            module.__dict__.pop("forward", None)


def _forward(module: nn.Linear, x: Tensor, gradients: bool) -> Tensor:
    return linear(x, module.weight, module.bias, gradients)


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
