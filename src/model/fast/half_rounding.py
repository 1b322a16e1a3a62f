"""How far a half type's own arithmetic moves a network's log-probs: the yardstick of the
tolerance of the paths that order half-type arithmetic otherwise than the modules (the
decoding steps, the continued prefill).

Two orderings of the same bfloat16 arithmetic may happen to agree (Gemma 3 270M's cached
decoding can equal its forward to the last bit) while a correct fused step differs from both
by a tenth of a nat; a tolerance taken only from such a pair is then too tight by an order of
magnitude and refuses a correct path. The half type's distance from float32 arithmetic over
the same weights does not vanish that way. A correct path orders the arithmetic otherwise
(norms folded into products, products fused), so it may lie up to twice as far from the
float32 values as the modules do; the two then lie at most three times that far from each
other (`FLOAT32_FACTOR`). The same holds one type up where the plain modules' float32
arithmetic is itself far from exact (`float64_rounding`, for `grouped_attention`).
docs/reliability.md states the rule.
"""

from __future__ import annotations

import logging

import torch
from torch import Tensor, nn

from src.model.fast.probe import log_softmax_difference, measured_per_kind

log = logging.getLogger(__name__)

# a path may differ from the modules by this many times what the modules' own reordered
# arithmetic moves (their cached decoding against their forward) ...
HALF_FACTOR = 4.0
# ... or by this many times what the half type's arithmetic moves the modules from float32's
FLOAT32_FACTOR = 3.0
# and always by this much (the tests' small networks, whose rounding moves thousandths)
HALF_FLOOR = 0.02
# float32 copies of the weights larger than this are not made for the yardstick
WIDENED_LIMIT = 4 * 2**30


def float32_rounding(network: nn.Module, forward: dict[str, Tensor], compared: int) -> float:
    """The difference (`log_softmax_difference`) at the last `compared` positions between
    the network's forward over `forward` in the type it computes in now (under autocast) and
    the same forward in float32 over the same weights widened, autocast off. 0.0, said in one
    INFO line, where the widened weights would pass `WIDENED_LIMIT` bytes or the float32
    forward raises (a quantized network): the yardstick is then the modules' own."""
    return widened_rounding(network, forward, compared, torch.float32)


def float64_rounding(network: nn.Module, forward: dict[str, Tensor], compared: int) -> float:
    """`float32_rounding` one type up: how far a float32 network's log-probs lie from those
    of the same weights widened to float64 (0.0 where they cannot be widened). The yardstick
    of a float32 path whose plain counterpart is itself far from exact arithmetic: torch's
    CPU flash attention, whose blockwise softmax moves a 30-layer network's far-tail
    log-probs by about a thousandth of a nat."""
    return widened_rounding(network, forward, compared, torch.float64)


@torch.no_grad()
def widened_rounding(
    network: nn.Module, forward: dict[str, Tensor], compared: int, wide: torch.dtype
) -> float:
    """The difference at the last `compared` positions between the network's forward as it
    computes now and the same forward over its floating weights and buffers widened to
    `wide`, autocast off; 0.0, said in one INFO line, where those would pass `WIDENED_LIMIT`
    bytes or the wide forward raises."""
    tensors = [*network.named_parameters(), *network.named_buffers()]
    floating = {name: t for name, t in tensors if t.is_floating_point()}
    size = torch.finfo(wide).bits // 8 * sum(t.numel() for t in floating.values())
    name = str(wide).removeprefix("torch.")
    if size > WIDENED_LIMIT:
        log.info("No %s yardstick for the fast paths: %.1f GiB of weights", name, size / 2**30)
        return 0.0
    computed = network(**forward).logits[:, -compared:]
    widened = {key: t.to(wide) for key, t in floating.items()}
    device = computed.device.type
    try:
        with torch.autocast(device, enabled=False):
            full = torch.func.functional_call(network, widened, args=(), kwargs=forward)
    except Exception as exc:  # a network that cannot run widened keeps the other yardstick
        log.info("No %s yardstick for the fast paths (%s: %s)", name, type(exc).__name__, exc)
        return 0.0
    return log_softmax_difference(computed, full.logits[:, -compared:])


def float32_yardstick(
    name: str, network: nn.Module, forward: dict[str, Tensor], compared: int
) -> float:
    """`FLOAT32_FACTOR` times `float32_rounding` over `forward`, measured once per kind of
    network under `name`: what a half-type path may differ from the modules by."""
    measure = lambda: float32_rounding(network, forward, compared)  # noqa: E731
    return FLOAT32_FACTOR * measured_per_kind(name, network, measure)


def float64_yardstick(
    name: str, network: nn.Module, forward: dict[str, Tensor], compared: int
) -> float:
    """`FLOAT32_FACTOR` times `float64_rounding` over `forward`, measured once per kind of
    network under `name`: what a float32 path may differ from plain modules that are
    themselves that far from exact arithmetic (the same triangle as the half types')."""
    measure = lambda: float64_rounding(network, forward, compared)  # noqa: E731
    return FLOAT32_FACTOR * measured_per_kind(name, network, measure)
