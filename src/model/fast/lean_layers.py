"""Fast path `lean_layers`: leaner training forwards for the gated MLP and RMSNorm of
Llama-family and Gemma networks, the same values with fewer tensors kept for backward.

Autograd keeps what every elementary operation needs for its own backward. A gated MLP,
`down(act(gate(x)) * up(x))`, so keeps four tensors of the MLP's width per token: the gate's
output, its activation, the up projection and their product; an RMSNorm keeps its input and
its normalised output. The functions below keep the gate and the up projection (and the
norm's input with one number per token) and recompute the rest in backward, which costs a
few elementwise operations, and less memory traffic. The gate's activation is SiLU (Llama,
Qwen) or GELU with the tanh approximation (Gemma); Llama's norm scales by `w` after the
cast back to the input's dtype, Gemma's by `1 + w` before it.

Inside `lean_layers` the MLP and norm modules of the known classes (`LEAN_MLPS`,
`LEAN_NORMS`, `GEMMA_NORMS`) run these functions while gradients are on; under
`torch.no_grad` (sampling, reference scores) they run as they are. Forward values are the
modules' own, bit for bit; gradients agree up to float rounding. The block switches modules
only once the probe (`check_lean_layers`) has found the outputs and gradients of the
network's own modules of each switched class equal to the lean functions' on a fixed input.
The classes are picked by name, so a renamed or rewritten class is simply not switched.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from functools import partial
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from src.model.fast import onednn
from src.model.fast.probe import largest_difference, proven

# classes whose forward is exactly down_proj(act_fn(gate_proj(x)) * up_proj(x))
LEAN_MLPS = frozenset(
    {"LlamaMLP", "MistralMLP", "Qwen2MLP", "Qwen3MLP", "GemmaMLP", "Gemma2MLP", "Gemma3MLP"}
)
# classes whose forward is weight * (x * rsqrt(mean(x^2) + eps)), computed in float32
LEAN_NORMS = frozenset({"LlamaRMSNorm", "MistralRMSNorm", "Qwen2RMSNorm", "Qwen3RMSNorm"})
# classes whose forward is (1 + weight) * (x * rsqrt(mean(x^2) + eps)), in float32
GEMMA_NORMS = frozenset({"GemmaRMSNorm", "Gemma2RMSNorm", "Gemma3RMSNorm"})
# activation classes that are SiLU (transformers' own, and torch's)
SILU_CLASSES = frozenset({"SiLU", "SiLUActivation"})
# activation classes that are GELU with the tanh approximation (transformers' names)
TANH_GELU_CLASSES = frozenset({"GELUTanh", "PytorchGELUTanh"})


def _tanh_gelu(x: Tensor) -> Tensor:
    return F.gelu(x, approximate="tanh")


def _tanh_gelu_backward(grad: Tensor, x: Tensor) -> Tensor:
    return torch.ops.aten.gelu_backward(grad, x, approximate="tanh")


# a gate activation's name -> its function and the gradient of its input (autograd's own)
ACTIVATIONS: dict[str, tuple[Callable[[Tensor], Tensor], Callable[[Tensor, Tensor], Tensor]]] = {
    "silu": (F.silu, torch.ops.aten.silu_backward),
    "gelu_tanh": (_tanh_gelu, _tanh_gelu_backward),
}


class GatedUp(torch.autograd.Function):
    """act(gate) * up, keeping only `gate` and `up` for backward; `activation` names an
    entry of `ACTIVATIONS`."""

    @staticmethod
    def forward(ctx: Any, gate: Tensor, up: Tensor, activation: str) -> Tensor:
        ctx.save_for_backward(gate, up)
        ctx.activation = activation
        return ACTIVATIONS[activation][0](gate) * up

    @staticmethod
    def backward(ctx: Any, grad: Tensor) -> tuple[Tensor | None, Tensor | None, None]:
        gate, up = ctx.saved_tensors
        activated = ACTIVATIONS[ctx.activation][0](gate)
        return (*_gate_grads(ctx, grad.clone(), activated, gate, up), None)


class GatedDown(torch.autograd.Function):
    """F.linear(act(gate) * up, weight, bias), keeping `gate`, `up` and the weight: the
    product, which the weight's gradient reads, is made again in backward. With `fast` the
    product goes through oneDNN (`src.model.fast.onednn`), as the routed down projection's,
    and with `fast_gradients` the gradients' products too, as that layer's own would
    (`onednn.routes_gradients`)."""

    @staticmethod
    def forward(
        ctx: Any,
        gate: Tensor,
        up: Tensor,
        weight: Tensor,
        bias: Tensor | None,
        fast: bool,
        fast_gradients: bool,
        activation: str,
    ) -> Tensor:
        ctx.save_for_backward(gate, up, weight)
        ctx.has_bias = bias is not None
        ctx.fast_gradients = fast_gradients  # as the routed down projection's own would be
        ctx.activation = activation
        hidden = ACTIVATIONS[activation][0](gate) * up
        return (onednn.product if fast else F.linear)(hidden, weight, bias)

    @staticmethod
    def backward(ctx: Any, grad: Tensor) -> tuple[Tensor | None, ...]:
        gate, up, weight = ctx.saved_tensors
        activated = ACTIVATIONS[ctx.activation][0](gate)
        grad_weight = grad_bias = None
        flat_grad = grad.reshape(-1, grad.size(-1))
        if ctx.needs_input_grad[2]:
            hidden = (activated * up).reshape(-1, up.size(-1))
            if ctx.fast_gradients:
                grad_weight = onednn.weight_grad(flat_grad, hidden)
            else:  # under autocast the product ran in its type: the gradient is the weight's
                grad_weight = flat_grad.t().mm(hidden.to(flat_grad.dtype)).to(weight.dtype)
            del hidden
        if ctx.has_bias and ctx.needs_input_grad[3]:
            grad_bias = flat_grad.sum(0)
        if ctx.fast_gradients:
            grad_hidden = onednn.input_grad(grad, weight)
        else:
            grad_hidden = grad.matmul(weight.to(grad.dtype))
        grad_gate, grad_up = _gate_grads(ctx, grad_hidden, activated, gate, up)
        return grad_gate, grad_up, grad_weight, grad_bias, None, None, None


def _gate_grads(
    ctx: Any, grad: Tensor, activated: Tensor, gate: Tensor, up: Tensor
) -> tuple[Tensor | None, Tensor | None]:
    """Gradients of act(gate) * up with respect to gate and up, where asked, by the formulas
    of autograd's own mul and activation backward. `grad` and `activated` (= act(gate)) are
    this function's to overwrite: they become the results, so backward makes one new tensor
    of the MLP's width beyond them."""
    grad_up = activated.mul_(grad) if ctx.needs_input_grad[1] else None
    grad_gate = None
    if ctx.needs_input_grad[0]:
        grad_gate = ACTIVATIONS[ctx.activation][1](grad.mul_(up), gate)
    return grad_gate, grad_up


class RMSNormFunction(torch.autograd.Function):
    """weight * (x * rsqrt(mean(x^2) + eps)) in float32 (float64 stays float64), cast back to
    x's dtype before the weight, keeping x and the reciprocal root (one number per row) for
    backward."""

    @staticmethod
    def forward(ctx: Any, x: Tensor, weight: Tensor, eps: float) -> Tensor:
        wide = x.to(_wide(x))
        rstd = torch.rsqrt(wide.pow(2).mean(-1, keepdim=True) + eps)
        ctx.save_for_backward(x, rstd, weight)
        return weight * (wide * rstd).to(x.dtype)

    @staticmethod
    def backward(ctx: Any, grad: Tensor) -> tuple[Tensor | None, Tensor | None, None]:
        x, rstd, weight = ctx.saved_tensors
        normed = x.to(_wide(x)) * rstd
        grad_weight = None
        if ctx.needs_input_grad[1]:
            per_row = grad * normed.to(x.dtype)
            grad_weight = per_row.reshape(-1, per_row.size(-1)).sum(0).to(weight.dtype)
            del per_row
        grad_x = None
        if ctx.needs_input_grad[0]:
            grad_normed = (grad * weight).to(_wide(x))
            mean = (grad_normed * normed).mean(-1, keepdim=True)
            grad_x = grad_normed.sub_(normed.mul_(mean)).mul_(rstd).to(x.dtype)
        return grad_x, grad_weight, None


class GemmaNormFunction(torch.autograd.Function):
    """(x * rsqrt(mean(x^2) + eps)) * (1 + weight) in float32 (float64 stays float64), cast
    back to x's dtype after the weight (Gemma 3's order), keeping x and the reciprocal root
    (one number per row) for backward."""

    @staticmethod
    def forward(ctx: Any, x: Tensor, weight: Tensor, eps: float) -> Tensor:
        wide = x.to(_wide(x))
        rstd = torch.rsqrt(wide.pow(2).mean(-1, keepdim=True) + eps)
        ctx.save_for_backward(x, rstd, weight)
        return (wide * rstd * (1.0 + weight.to(wide.dtype))).to(x.dtype)

    @staticmethod
    def backward(ctx: Any, grad: Tensor) -> tuple[Tensor | None, Tensor | None, None]:
        x, rstd, weight = ctx.saved_tensors
        normed = x.to(_wide(x)) * rstd
        wide_grad = grad.to(normed.dtype)
        grad_weight = None
        if ctx.needs_input_grad[1]:
            per_row = (wide_grad * normed).reshape(-1, normed.size(-1))
            grad_weight = per_row.sum(0).to(weight.dtype)
            del per_row
        grad_x = None
        if ctx.needs_input_grad[0]:
            grad_normed = wide_grad * (1.0 + weight.to(normed.dtype))
            mean = (grad_normed * normed).mean(-1, keepdim=True)
            grad_x = grad_normed.sub_(normed.mul_(mean)).mul_(rstd).to(x.dtype)
        return grad_x, grad_weight, None


def _wide(x: Tensor) -> torch.dtype:
    """The dtype an RMSNorm computes in: float32, or float64 for float64 input."""
    return torch.promote_types(x.dtype, torch.float32)


def lean_mlp_forward(module: nn.Module, x: Tensor, activation: str = "silu") -> Tensor:
    """A `LEAN_MLPS` module's forward through `GatedUp`, or `GatedDown` where the down
    projection is a plain `nn.Linear` (not an adapter or a quantised layer)."""
    gate, up = module.gate_proj(x), module.up_proj(x)
    down = module.down_proj
    if type(down) is nn.Linear:
        fast, gradients = onednn.is_routed(down), onednn.routes_gradients(down)
        return GatedDown.apply(gate, up, down.weight, down.bias, fast, gradients, activation)
    return down(GatedUp.apply(gate, up, activation))


def lean_norm_forward(module: nn.Module, x: Tensor) -> Tensor:
    """A `LEAN_NORMS` module's forward through `RMSNormFunction`."""
    return RMSNormFunction.apply(x, module.weight, module.variance_epsilon)


def gemma_norm_forward(module: nn.Module, x: Tensor) -> Tensor:
    """A `GEMMA_NORMS` module's forward through `GemmaNormFunction`."""
    return GemmaNormFunction.apply(x, module.weight, module.eps)


def gate_activation(module: nn.Module) -> str | None:
    """The `ACTIVATIONS` name of an MLP's gate activation, or None when it is none of them."""
    name = type(getattr(module, "act_fn", None)).__name__
    if name in SILU_CLASSES:
        return "silu"
    if name in TANH_GELU_CLASSES:
        return "gelu_tanh"
    return None


def _lean_forward(module: nn.Module) -> Any:
    """The lean forward for `module`, or None when its class is not known to match."""
    name = type(module).__name__
    if name in LEAN_MLPS and (activation := gate_activation(module)) is not None:
        return partial(lean_mlp_forward, activation=activation)
    if name in LEAN_NORMS and hasattr(module, "variance_epsilon"):
        return lean_norm_forward
    if name in GEMMA_NORMS and hasattr(module, "eps"):
        return gemma_norm_forward
    return None


def _targets(network: nn.Module) -> list[tuple[nn.Module, Any]]:
    """The modules the block switches, with their lean forwards: those of known classes
    without an instance-level forward of their own (e.g. packed), which stays in charge."""
    found = []
    for module in network.modules():
        if "forward" not in module.__dict__ and (lean := _lean_forward(module)) is not None:
            found.append((module, lean))
    return found


@contextlib.contextmanager
def lean_layers(network: nn.Module, enabled: bool = True) -> Iterator[int]:
    """Within the block, while gradients are on, the network's known gated MLPs and RMSNorms
    keep fewer tensors for backward. Yields how many modules were switched; the modules are
    restored on exit. Does nothing when `enabled` is false, without gradients (nothing is
    kept then), or when the probe has found the lean forwards wrong for this network."""
    targets = _targets(network) if enabled and torch.is_grad_enabled() else []
    if not targets or not proven("lean_layers", network, partial(check_lean_layers, network)):
        yield 0
        return
    with switched(network, targets) as count:
        yield count


@contextlib.contextmanager
def switched(
    network: nn.Module, targets: list[tuple[nn.Module, Any]] | None = None
) -> Iterator[int]:
    """The switch itself, unprobed (the probe and tests use it), of `targets` when the caller
    has found them already (`_targets(network)` otherwise)."""
    targets = _targets(network) if targets is None else targets
    try:
        for module, lean in targets:
            module.forward = _when_grad(module, lean)
        yield len(targets)
    finally:
        for module, _ in targets:
            module.__dict__.pop("forward", None)


def _when_grad(module: nn.Module, lean: Any) -> Any:
    """A forward that runs `lean` while gradients are on and the class's own otherwise."""
    own = type(module).forward

    def forward(*args: Any, **kwargs: Any) -> Tensor:
        if torch.is_grad_enabled() and len(args) == 1 and not kwargs:
            return lean(module, args[0])
        return own(module, *args, **kwargs)

    return forward


def check_lean_layers(network: nn.Module) -> float:
    """The largest difference between the lean and the own forward and backward of each kind
    of module the block switches (the first of each class): outputs, and gradients with
    respect to the input and the module's trainable weights relative to the own path's
    largest entry, for a fixed input of 2 x 6 positions. Every module of a class runs the same
    code, so the first stands for the rest."""
    firsts: dict[type, tuple[nn.Module, Any]] = {}
    for module, lean in _targets(network):
        firsts.setdefault(type(module), (module, lean))
    generator = torch.Generator().manual_seed(1234)
    hidden = network.get_input_embeddings().weight  # what the layers read: its dtype, device
    difference = 0.0
    for module, lean in firsts.values():
        x = torch.randn(2, 6, _input_width(module), generator=generator)
        x = x.to(hidden.device, hidden.dtype)
        trained = [p for p in module.parameters() if p.requires_grad]
        results = []
        for run in (type(module).forward, lean):
            inputs = x.clone().requires_grad_()
            with torch.enable_grad():
                out = run(module, inputs)
                weights = torch.linspace(-1.0, 1.0, out.numel(), device=out.device)
                grads = torch.autograd.grad(
                    (out.float() * weights.view_as(out)).sum(), [inputs, *trained]
                )
            results.append((out.detach(), grads))
        (own, own_grads), (fast, fast_grads) = results
        scale = float(own.abs().max()) or 1.0
        difference = max(difference, largest_difference(fast, own) / scale)
        for fast_grad, own_grad in zip(fast_grads, own_grads, strict=True):
            scale = float(own_grad.abs().max()) or 1.0
            difference = max(difference, largest_difference(fast_grad, own_grad) / scale)
    return difference


def _input_width(module: nn.Module) -> int:
    """The width of what a switched module reads: an MLP's gate input, a norm's weight."""
    if hasattr(module, "gate_proj"):
        gate = module.gate_proj
        base = gate.get_base_layer() if hasattr(gate, "get_base_layer") else gate
        return base.in_features
    return module.weight.numel()
