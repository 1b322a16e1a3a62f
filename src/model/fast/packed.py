"""Fast path `packed_weights`: prepacked weights for decoding on the CPU. Each float32 linear
layer's weight is packed once for MKL's matrix product (or, where `src.model.fast.onednn`
finds oneDNN's product faster on this machine at the network's widths, reordered once into
oneDNN's own layout, `onednn.prepacked`), and a LoRA layer's adapter is merged into that copy.

A decoding step multiplies a few rows by every weight of the network. `nn.Linear` repacks its
weight for each such product, which on two cores costs as much as the product itself; and a
LoRA layer adds two more small products per step. Inside `packed_linears` the layers read one
packed copy per decoding instead. The module weights are never changed: the copies are dropped
on exit. The packing and the product are torch's private MKL (or oneDNN) ops and the merge
reads peft's adapter tensors, so both run only once the `packed_weights` probe
(`src.model.fast.decoding`) has found the logits of a few decoding steps through them equal
to the network's own.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from functools import partial

import torch
from torch import Tensor, nn

from src.model.fast import onednn

# SmolLM2's 192 x 576 key projection gains from packing; the tiny model's 128 x 512 does not
MIN_PACKED_ELEMENTS = 100_000
MAX_PACKED_ROWS = 256  # beyond this many rows a product amortises its own packing


def can_pack(rows: int) -> bool:
    """Whether MKL's packed product is available and worth it for `rows` rows at a time (one
    row is a matrix-vector product, which packs nothing)."""
    return torch.backends.mkl.is_available() and 2 <= rows <= MAX_PACKED_ROWS


def packable(network: nn.Module) -> bool:
    """Whether `network` has a layer `packed_linears` could pack: a float32 CPU `nn.Linear`,
    plain or under a LoRA layer."""
    for module in network.modules():
        base = module if type(module) is nn.Linear else lora_base(module)
        if base is not None and _packable(base.weight, 0) is not None:
            return True
    return False


@contextlib.contextmanager
def packed_linears(network: nn.Module, rows: int, min_elements: int | None = None) -> Iterator[int]:
    """Within the block, every float32 CPU `nn.Linear` of at least `min_elements` weights,
    and every vanilla LoRA layer over one, multiplies batches of exactly `rows` rows by a
    packed copy of its weight (the adapter merged in); other batch sizes run as before.
    Yields how many layers were packed. Does nothing in training mode (dropout would differ
    from the merged product) or where `can_pack(rows)` is false."""
    if network.training or not can_pack(rows):
        yield 0
        return
    through_onednn = decodes_through_onednn(network)
    if min_elements is None:
        min_elements = smallest_packed(through_onednn)
    restore: list[Callable[[], None]] = []
    try:
        skip: set[int] = set()
        for module in network.modules():
            if id(module) in skip:
                continue
            weight, bias = effective_weight(module, min_elements)
            if weight is None:
                continue
            skip.update(id(inner) for inner in module.modules())
            product = packed_product(weight, bias, rows, through_onednn)
            restore.append(_route(module, product, rows))
        yield len(restore)
    finally:
        for undo in reversed(restore):
            undo()


def effective_weight(
    module: nn.Module, min_elements: int = 0
) -> tuple[Tensor | None, Tensor | None]:
    """The weight and bias that `module` applies when it is an affine float32 CPU layer of at
    least `min_elements` weights we can pack: a plain `nn.Linear`, or a peft LoRA `Linear` over
    one whose active adapters are all vanilla LoRA (their deltas merged into a new tensor,
    only once the size is known to qualify); (None, None) for anything else."""
    base = module if type(module) is nn.Linear else lora_base(module)
    if base is None or _packable(base.weight, min_elements) is None:
        return None, None
    return merged_weight(module)


def merged_weight(module: nn.Module) -> tuple[Tensor | None, Tensor | None]:
    """The weight and bias that `module` applies, of any float type and device: a plain
    `nn.Linear`'s own, or for a peft LoRA `Linear` over one whose active adapters are all
    vanilla LoRA, its base weight with their deltas added in float32 and rounded once to the
    weight's type (a new tensor); (None, None) for anything else."""
    if type(module) is nn.Linear:
        return module.weight.detach(), module.bias
    base = lora_base(module)
    if base is None or base.weight.dim() != 2 or not base.weight.is_floating_point():
        return None, None
    weight = base.weight.detach()
    if module.merged or module.disable_adapters:
        return weight, base.bias  # the base alone is what the layer computes
    adapters = [name for name in module.active_adapters if name in module.lora_A]
    if not all(_vanilla(module, name) for name in adapters):
        return None, None  # DoRA and other variants, or adapter biases: left as they are
    merged = weight.float().clone()
    for name in adapters:
        merged += module.get_delta_weight(name).float()
    return merged.to(weight.dtype), base.bias


def lora_base(module: nn.Module) -> nn.Linear | None:
    """The plain `nn.Linear` under a peft LoRA `Linear`, or None when `module` is not one."""
    try:
        from peft.tuners.lora import Linear as LoraLinear
    except ImportError:
        return None
    if not isinstance(module, LoraLinear):
        return None
    base = module.get_base_layer()
    return base if type(base) is nn.Linear else None


def _vanilla(module: nn.Module, adapter: str) -> bool:
    """Whether a LoRA layer's adapter is the plain low-rank product (no DoRA or other
    variant, no bias of its own); `lora_variant` and `lora_bias` exist from peft 0.16 and
    0.14 on, `use_dora` in every version we support."""
    variants = getattr(module, "lora_variant", {})
    biases = getattr(module, "lora_bias", {})
    return not (module.use_dora.get(adapter) or adapter in variants or biases.get(adapter))


def _packable(weight: Tensor, min_elements: int) -> Tensor | None:
    """`weight` detached when MKL can pack it (float32, CPU, a matrix) and it is big enough."""
    if weight.dtype != torch.float32 or weight.device.type != "cpu" or weight.dim() != 2:
        return None
    return weight.detach() if weight.numel() >= min_elements else None


def decodes_through_onednn(network: nn.Module, dtype: torch.dtype = torch.float32) -> bool:
    """Whether `network`'s decoding products of `dtype` weights go through oneDNN:
    `onednn.usable` with the decoding verdict of that type (`onednn.decoding_verdict`), at the
    network's widths."""
    return onednn.usable(onednn.widths_of(network), onednn.decoding_verdict(dtype))


def smallest_packed(through_onednn: bool) -> int:
    """The fewest weights a layer needs to be worth packing: any through oneDNN, whose
    reordered copy gains at every size a decoding step multiplies; `MIN_PACKED_ELEMENTS` for
    MKL."""
    return 0 if through_onednn else MIN_PACKED_ELEMENTS


def packed_product(
    weight: Tensor, bias: Tensor | None, rows: int, through_onednn: bool
) -> Callable[[Tensor], Tensor]:
    """x -> x @ weight.T + bias for batches of exactly `rows` rows: through a copy of
    `weight` reordered once for oneDNN where `through_onednn` (`decodes_through_onednn`; that
    copy takes any number of rows), else through one packed once for MKL (`can_pack(rows)`
    must hold)."""
    bias = None if bias is None else bias.detach()
    if through_onednn:
        return partial(onednn.product, weight=onednn.prepacked(weight, rows), bias=bias)
    packed = torch.ops.mkl._mkl_reorder_linear_weight(weight, rows)
    return lambda x: torch.ops.mkl._mkl_linear(x, packed, weight, bias, rows)


def _route(module: nn.Module, product: Callable[[Tensor], Tensor], rows: int) -> Callable[[], None]:
    """Send `module`'s batches of `rows` rows through `product`; returns the undo."""
    original = module.forward
    own = module.__dict__.get("forward")  # e.g. an accelerate hook's wrapper

    def forward(x: Tensor, *args: object, **kwargs: object) -> Tensor:
        if args or kwargs or x.numel() != rows * x.size(-1):
            return original(x, *args, **kwargs)
        return product(x)

    module.forward = forward

    def undo() -> None:
        if own is None:
            del module.forward
        else:
            module.forward = own

    return undo
