"""Fast path `grouped_attention`: on the CPU, the attention of a network whose key/value heads
serve several query heads each (grouped-query attention: Gemma 3 270M's 4 query heads over 1,
SmolLM2's 9 over 3) shares them inside the kernel.

transformers' `sdpa` attention copies each key/value head once per query head it serves
(`repeat_kv`) before `scaled_dot_product_attention` wherever an attention mask is given on the
CPU, which is every log-prob pass of left-padded rows; the copies are as large as the keys and
values times the group, and their backward sums them back. `scaled_dot_product_attention`
takes the heads as they are with `enable_gqa=True` (torch's public API; its CPU flash kernel
reads each key/value head for its group). `grouped_sdpa` is transformers' `sdpa` attention
with that one change, registered under `NAME` through transformers' public
`AttentionInterface` (with `sdpa`'s masks, `AttentionMaskInterface`), and the network is
switched to it (`set_attn_implementation`) once the probe has compared its logits with
`sdpa`'s on the probe batch, in the precision the network computes in. On a difference, on a
GPU (where a mask sends `enable_gqa` to the slow kernel), or for another attention than
`sdpa`, nothing changes.
"""

from __future__ import annotations

import functools
import inspect
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from transformers import AttentionInterface
from transformers.masking_utils import AttentionMaskInterface, sdpa_mask

from src.model.fast.probe import log_softmax_difference, probe_input, proven
from src.model.positions import position_ids

NAME = "grpo_grouped_sdpa"  # the attention implementation's registered name
PLAIN = "sdpa"  # the implementation it stands in for


def grouped_sdpa(
    module: nn.Module,
    query: Tensor,
    key: Tensor,
    value: Tensor,
    attention_mask: Tensor | None,
    dropout: float = 0.0,
    scaling: float | None = None,
    is_causal: bool | None = None,
    **kwargs: Any,
) -> tuple[Tensor, None]:
    """transformers' `sdpa` attention (query [B, Hq, T, D], key and value [B, Hkv, S, D]) with
    the key/value heads shared by their query heads in the kernel, not copied per head.
    Returns the output [B, T, Hq, D] and no attention weights."""
    if kwargs.get("softcap") is not None or kwargs.get("position_bias") is not None:
        raise ValueError(f"{NAME} takes neither a soft cap nor a position bias")
    if attention_mask is not None and attention_mask.dim() == 4:
        attention_mask = attention_mask[:, :, :, : key.size(-2)]
    causal = getattr(module, "is_causal", True) if is_causal is None else is_causal
    causal = query.size(2) > 1 and attention_mask is None and causal
    if causal and key.size(2) > query.size(2):  # an empty cache's prefill: the first positions
        key, value = key[:, :, : query.size(2)], value[:, :, : query.size(2)]
    output = F.scaled_dot_product_attention(
        query,
        key,
        value,
        attn_mask=attention_mask,
        dropout_p=dropout,
        scale=scaling,
        is_causal=causal,
        enable_gqa=key.size(1) != query.size(1),
    )
    return output.transpose(1, 2).contiguous(), None


@functools.cache
def registered() -> str:
    """`NAME`, registered with transformers once per process (attention and masks)."""
    AttentionInterface.register(NAME, grouped_sdpa)
    AttentionMaskInterface.register(NAME, sdpa_mask)
    return NAME


def use_grouped_attention(network: nn.Module) -> bool:
    """Switch `network` (a transformers model, or a peft model over one) to `grouped_sdpa`
    where it runs transformers' `sdpa` on the CPU over grouped key/value heads and the probe
    proves it on this kind of network; whether it runs so now."""
    base = network.get_base_model() if hasattr(network, "get_base_model") else network
    config = getattr(base, "config", None)
    implementation = getattr(config, "_attn_implementation", None)
    if implementation == NAME:
        return True
    parameter = next(network.parameters(), None)
    if implementation != PLAIN or parameter is None or parameter.device.type != "cpu":
        return False
    heads = getattr(config, "num_attention_heads", None)
    if getattr(config, "num_key_value_heads", heads) == heads:
        return False  # every query head has its own key/value head: nothing is copied
    if not proven("grouped_attention", network, functools.partial(check_grouped, base)):
        return False
    base.set_attn_implementation(registered())
    return True


@torch.no_grad()
def check_grouped(network: nn.Module) -> float:
    """The largest difference, after log-softmax, between the network's logits over the probe
    batch (left-padded prompts and their continuations) with `grouped_sdpa` and with `sdpa`;
    the network is left on `sdpa`."""
    prompt_ids, prompt_mask, continuations = probe_input(network, prompts=2, group_size=1)
    ids = torch.cat([prompt_ids, continuations], dim=1)
    mask = torch.cat([prompt_mask, torch.ones_like(continuations)], dim=1)
    inputs = {"input_ids": ids, "attention_mask": mask, "position_ids": position_ids(mask)}
    if "logits_to_keep" in inspect.signature(network.forward).parameters:
        inputs["logits_to_keep"] = continuations.size(1)  # every layer's attention is compared
    plain = network(**inputs, use_cache=False).logits
    network.set_attn_implementation(registered())
    try:
        grouped = network(**inputs, use_cache=False).logits
    finally:
        network.set_attn_implementation(PLAIN)
    return log_softmax_difference(grouped, plain)
