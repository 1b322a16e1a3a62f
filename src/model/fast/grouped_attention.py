"""Fast path `grouped_attention`: the log-prob passes' attention on the CPU as two batched
products and a float32 softmax, the query heads of each key/value head read as rows of one
product.

transformers runs a network's attention through torch's `scaled_dot_product_attention` (its
`sdpa` implementation). On the CPU, with the boolean mask a padded batch needs, that is a
flash kernel whose backward is several times its forward, and where a key/value head serves
several query heads, transformers copies it per query head first and sums the copies'
gradients after (docs/performance.md). Here each key/value head's query heads are one batch
of rows (no copy of the keys), the scores one product and the softmax in float32 (as SDPA
accumulates them), the values one product in their own type; autograd's own backward.

It keeps the scores (a float32 and a compute-type number per query, key and head) for
backward where the flash kernel keeps one number per query, so it serves only calls whose
scores stay under `MOST_SCORES`; longer ones, any other device, and what it does not compute
(no mask, dropout, soft caps, position biases, attention sinks) go to `sdpa` as before. The
path is registered under its own name with transformers' public `AttentionInterface` (and
`sdpa`'s masks with `AttentionMaskInterface`), and a network takes it only inside
`grouped_attention` (the log-prob passes), once `check_grouped_attention` has found its
outputs and gradients equal to `sdpa`'s on the network's own head shapes, and the network's
log-probs through it equal to those through `sdpa` on the probe batch: in float32 within the
probe's tolerance or `FLOAT32_FACTOR` times what float32 arithmetic moves them through `sdpa`
from float64's, in a half type within `FLOAT32_FACTOR` times what the half type's own
arithmetic moves them from float32's (`half_rounding`), as the decoding paths.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable, Iterator
from typing import Any

import torch
from torch import Tensor, nn

from src.model.fast.half_rounding import HALF_FLOOR, float32_yardstick, float64_yardstick
from src.model.fast.probe import (
    TOLERANCE,
    computed_dtype,
    device_of,
    largest_difference,
    log_softmax_difference,
    probe_forward,
    proven,
)

PATH = "grouped_attention"  # the fast path ($GRPO_FAST_PATHS_OFF)
NAME = "grpo_grouped"  # its name among transformers' attention implementations
PLAIN = "sdpa"  # the implementation it stands in for
# the most query x key x head scores one call keeps (16 MiB of float32); longer calls go to SDPA
MOST_SCORES = 2**22


def grouped_attention_forward(
    module: nn.Module,
    query: Tensor,
    key: Tensor,
    value: Tensor,
    attention_mask: Tensor | None,
    dropout: float = 0.0,
    scaling: float | None = None,
    **kwargs: Any,
) -> tuple[Tensor, None]:
    """transformers' attention function signature: query [B, H, Q, D], key and value
    [B, KV, K, D], the mask [B, 1 or H, Q, K] (True where a query reads a key);
    returns the output [B, Q, H, D] and no weights. What `served` refuses goes to `sdpa`."""
    if not served(query, key, attention_mask, dropout, kwargs):
        return _plain()(module, query, key, value, attention_mask, dropout, scaling, **kwargs)
    scale = query.size(-1) ** -0.5 if scaling is None else scaling
    return attention(query, key, value, attention_mask, scale).transpose(1, 2), None


def served(
    query: Tensor, key: Tensor, mask: Tensor | None, dropout: float, kwargs: dict[str, Any]
) -> bool:
    """Whether a call is one `attention` computes: on the CPU, with a boolean mask (what
    transformers makes for `sdpa`), no dropout, no soft cap, position bias or attention sink,
    its scores under `MOST_SCORES`."""
    batch, heads, queries, _ = query.shape
    return (
        query.device.type == "cpu"
        and mask is not None
        and mask.dtype == torch.bool
        and dropout == 0.0
        and kwargs.get("softcap") is None
        and kwargs.get("position_bias") is None
        and kwargs.get("s_aux") is None
        and not kwargs.get("output_attentions", False)
        and batch * heads * queries * key.size(2) <= MOST_SCORES
    )


def attention(query: Tensor, key: Tensor, value: Tensor, mask: Tensor, scale: float) -> Tensor:
    """softmax(scale * Q K^T) V [B, H, Q, D] over the keys each query reads (where the
    boolean `mask` [B or 1, 1 or H, Q, K] is True), for query [B, H, Q, D] and key, value
    [B, KV, K, D] (H a multiple of KV, query head h reading key/value head h // (H / KV)); a
    query that reads no key (a padding position) gets 0 and no gradient, as from SDPA. The
    scores and the softmax in float32, as SDPA accumulates them (autocast off: in a half
    type, rounding the scores moves Gemma 3's log-probs further from SDPA's than the half
    type's own arithmetic does); the values' product in the values' type."""
    batch, heads, queries, dim = query.shape
    kv_heads, keys = key.size(1), key.size(2)
    per_kv = heads // kv_heads
    by_rows = (batch * kv_heads, per_kv * queries, keys)
    with torch.autocast(query.device.type, enabled=False):
        rows = query.reshape(batch * kv_heads, per_kv * queries, dim).float()
        read = key.reshape(batch * kv_heads, keys, dim).float().transpose(1, 2)
        scores = torch.bmm(rows, read).mul_(scale)
        allowed = mask.expand(batch, heads, queries, keys).reshape(by_rows)
        scores = scores.masked_fill(~allowed, torch.finfo(torch.float32).min)
        weights = torch.softmax(scores, dim=-1).to(value.dtype)
        out = torch.bmm(weights, value.reshape(batch * kv_heads, keys, dim))
    out = out.masked_fill(~allowed.any(dim=-1, keepdim=True), 0.0)
    return out.view(batch, heads, queries, dim)


def _plain() -> Any:
    """transformers' `sdpa` attention function."""
    from transformers import AttentionInterface

    return AttentionInterface()[PLAIN]


_registered: list[bool] = []


def register() -> None:
    """Register `grouped_attention_forward` as `NAME` with transformers (once), with `sdpa`'s
    masks."""
    if _registered:
        return
    from transformers import AttentionInterface, AttentionMaskInterface

    AttentionInterface.register(NAME, grouped_attention_forward)
    AttentionMaskInterface.register(NAME, AttentionMaskInterface()[PLAIN])
    _registered.append(True)


def pretrained(network: nn.Module) -> nn.Module | None:
    """The transformers model under `network` (itself, or a peft model's base) when its
    attention runs through `sdpa` and it can change its attention implementation, else None."""
    base = network.get_base_model() if hasattr(network, "get_base_model") else network
    config = getattr(base, "config", None)
    if config is None or not hasattr(base, "set_attn_implementation"):
        return None
    return base if config._attn_implementation in (PLAIN, NAME) else None


@contextlib.contextmanager
def implementation(base: nn.Module, name: str) -> Iterator[None]:
    """Within the block, `base` computes its attention through implementation `name`."""
    before = base.config._attn_implementation
    if before == name:
        yield
        return
    register()
    base.set_attn_implementation(name)
    try:
        yield
    finally:
        base.set_attn_implementation(before)


@contextlib.contextmanager
def grouped_attention(network: nn.Module, enabled: bool = True) -> Iterator[bool]:
    """Within the block, `network`'s attention goes through `grouped_attention_forward`
    where `enabled`, the network is a CPU transformers model on `sdpa`, and the path is proven
    on it (`check_grouped_attention`); yields whether it does."""
    base = pretrained(network) if enabled else None
    if base is None or device_of(network).type != "cpu":
        yield False
        return
    check = functools.cache(functools.partial(check_grouped_attention, network))
    if not proven(PATH, network, check, tolerance(network, check)):
        yield False
        return
    with implementation(base, NAME):
        yield True


def tolerance(network: nn.Module, check: Callable[[], float]) -> Callable[[], float] | None:
    """The tolerance of `check_grouped_attention` (`check`, its cached call) on `network`,
    measured once per kind of network: None (the probe's) in float64; in float32 the probe's,
    or, where `check` finds more, `FLOAT32_FACTOR` times what float32 arithmetic moves the
    network's log-probs through `sdpa` from float64's if that is more (the float64 copy of the
    weights made only then); in a half type `FLOAT32_FACTOR` times what its arithmetic moves
    them from float32's, at least `HALF_FLOOR`. Any reordering of attention's arithmetic moves the
    log-probs by about what the type's rounding does: torch's CPU flash kernel (`sdpa`) puts
    SmolLM2-135M's far-tail log-probs a few ten-thousandths of a nat from float64's in float32,
    where this path's single softmax lies closer, so the two may differ by more than the fixed
    thousandth; Gemma 3 270M's through transformers' own `eager` attention differ from `sdpa`'s
    by a fifth of a nat in bfloat16."""
    dtype = computed_dtype(network)
    if dtype not in (torch.float32, torch.bfloat16, torch.float16):
        return None

    def measured() -> float:
        forward, _, compared = probe_forward(network)
        arguments = {**forward, "use_cache": False}
        if dtype == torch.float32:
            if check() <= TOLERANCE[torch.float32]:
                return TOLERANCE[torch.float32]
            moved = float64_yardstick("float64_rounding", network, arguments, compared)
            return max(TOLERANCE[torch.float32], moved)
        return max(HALF_FLOOR, float32_yardstick("float32_rounding", network, arguments, compared))

    return measured


def check_grouped_attention(network: nn.Module) -> float:
    """The largest of: `attention`'s output and its gradients of the query, key and value
    against `sdpa`'s, on random inputs of the network's head shapes with a left-padded mask
    (relative to each one's largest entry); and the network's logits through it against
    through `sdpa` on the probe batch, after log-softmax."""
    base = pretrained(network)
    if base is None:
        raise RuntimeError("not a transformers model whose attention runs through sdpa")
    config = base.config
    text = config.get_text_config() if hasattr(config, "get_text_config") else config
    heads, kv_heads = text.num_attention_heads, text.num_key_value_heads
    dim = getattr(text, "head_dim", None) or text.hidden_size // heads
    dtype = next(p for p in network.parameters() if p.is_floating_point()).dtype
    return max(
        function_difference(heads, kv_heads, dim, dtype),
        network_difference(network, base),
    )


def function_difference(heads: int, kv_heads: int, dim: int, dtype: torch.dtype) -> float:
    """`check_grouped_attention`'s first part: 2 rows of 5 queries over 7 keys (the first
    two keys padding in the second row, and its first query reading none)."""
    with torch.inference_mode(False), torch.enable_grad():  # whatever pass asks first
        return _function_difference(heads, kv_heads, dim, dtype)


def _function_difference(heads: int, kv_heads: int, dim: int, dtype: torch.dtype) -> float:
    generator = torch.Generator().manual_seed(1234)
    shapes = [(2, heads, 5, dim), (2, kv_heads, 7, dim), (2, kv_heads, 7, dim)]
    given = [torch.randn(*s, generator=generator).to(dtype) for s in shapes]
    mask = torch.ones(2, 1, 5, 7, dtype=torch.bool).tril(diagonal=2)
    mask[1, :, :, :2] = False
    mask[1, :, 0] = False
    module = _Grouped(heads // kv_heads)
    grad = torch.randn(2, 5, heads, dim, generator=generator).to(dtype)
    results = []
    for run in (_plain(), grouped_attention_forward):
        leaves = [t.clone().requires_grad_() for t in given]
        out, _ = run(module, *leaves, mask, 0.0, dim**-0.5)
        results.append([out.detach(), *torch.autograd.grad(out, leaves, grad)])
    return max(
        largest_difference(ours, theirs) / (float(theirs.abs().max()) or 1.0)
        for theirs, ours in zip(*results, strict=True)
    )


class _Grouped(nn.Module):
    """The attention module's one attribute the attention functions read."""

    def __init__(self, groups: int) -> None:
        super().__init__()
        self.num_key_value_groups = groups
        self.is_causal = True


@torch.no_grad()
def network_difference(network: nn.Module, base: nn.Module) -> float:
    """`check_grouped_attention`'s second part: the network's logits over the probe batch's
    full sequences through `sdpa` and through this path, after log-softmax, at the real
    positions."""
    arguments, real, _ = probe_forward(network)
    logits = {}
    for name in (PLAIN, NAME):
        with implementation(base, name):
            logits[name] = network(**arguments, use_cache=False).logits
    return log_softmax_difference(logits[NAME][real], logits[PLAIN][real])
