"""The decoding loop of the hf sampler: each prompt is read once, its G completions continue
from copies of its key/value cache, and each token is drawn with one uniform number.

`generate` would repeat every prompt G times and run the full prefill for each copy, and its
multinomial draw costs one exponential variate per vocabulary entry and row (25 ms per step at
SmolLM2's 49k vocabulary on two CPU cores). The loop below does the same sampling with G times
less prefill and an inverse-CDF draw; `tests/rollout/test_decode.py` holds it to `generate`.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor, nn
from transformers import (
    LogitsProcessorList,
    RepetitionPenaltyLogitsProcessor,
    TemperatureLogitsWarper,
    TopKLogitsWarper,
    TopPLogitsWarper,
)

from src.model.causal_lm import position_ids
from src.model.hf_cache import cache_argument, returned_cache
from src.model.llama_steps import LlamaSteps


@dataclass(frozen=True)
class Sampling:
    """How each next token is chosen: the sampler's settings, or greedy decoding."""

    greedy: bool = False
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = 0
    repetition_penalty: float = 1.0
    min_new_tokens: int = 0  # end-of-sequence is suppressed before this many new tokens

    def processors(self) -> LogitsProcessorList:
        """The logits processors `generate` would apply, in its order; none for greedy."""
        chain = LogitsProcessorList()
        if self.greedy:
            return chain
        if self.repetition_penalty != 1.0:
            chain.append(RepetitionPenaltyLogitsProcessor(self.repetition_penalty))
        if self.temperature != 1.0:
            chain.append(TemperatureLogitsWarper(self.temperature))
        if self.top_k > 0:
            chain.append(TopKLogitsWarper(self.top_k))
        if self.top_p < 1.0:
            chain.append(TopPLogitsWarper(self.top_p))
        return chain


def draw(scores: Tensor, generator: torch.Generator | None = None) -> Tensor:
    """One token per row from softmax(scores) [N, V], by inverse CDF with one uniform number
    per row (float64 cumulative sums; a token of probability 0 is never drawn)."""
    probs = torch.softmax(scores.double(), dim=-1)
    cdf = probs.cumsum(dim=-1)
    u = torch.rand(scores.size(0), 1, dtype=cdf.dtype, device=cdf.device, generator=generator)
    index = torch.searchsorted(cdf, u * cdf[:, -1:], right=True)
    return index.clamp(max=scores.size(-1) - 1).squeeze(1)


@torch.no_grad()
def decode(
    network: nn.Module,
    prompt_ids: Tensor,
    prompt_mask: Tensor,
    group_size: int,
    max_new_tokens: int,
    eos_token_ids: list[int],
    pad_token_id: int,
    sampling: Sampling,
    keeps_few_logits: bool = True,
    steps: LlamaSteps | None = None,
) -> Tensor:
    """New tokens [B * group_size, <= max_new_tokens] for the B left-padded prompts, rows
    i*G .. i*G+G-1 continuing prompt i; pad after each row's first EOS. Stops when every row
    has ended. The network runs as given (the caller sets eval mode); `keeps_few_logits` says
    whether its forward takes `logits_to_keep` (the prompt's other positions need no logits).
    With `steps` (built for B * group_size rows) the prompts and the new tokens go through
    them instead of the network's modules."""
    device = prompt_ids.device
    eos = torch.as_tensor(eos_token_ids, device=device)
    processors = sampling.processors()
    cache = None  # the modules' key/value cache; the steps hold their own
    if steps is not None:
        logits = steps.prefill(prompt_ids, prompt_mask, group_size, max_new_tokens)
    else:
        out = network(
            input_ids=prompt_ids,
            attention_mask=prompt_mask,
            position_ids=position_ids(prompt_mask),
            use_cache=True,
            **({"logits_to_keep": 1} if keeps_few_logits else {}),
        )
        cache = returned_cache(out)
        cache.batch_repeat_interleave(group_size)
        reserve(cache, max_new_tokens)
        logits = out.logits[:, -1, :].float()
        del out
    logits = logits.repeat_interleave(group_size, dim=0)
    mask = prompt_mask.repeat_interleave(group_size, dim=0)
    seen = prompt_ids.repeat_interleave(group_size, dim=0)  # what repetition penalty reads
    position = mask.sum(dim=1, keepdim=True)  # the next token's position id
    rows = mask.size(0)
    ended = torch.zeros(rows, dtype=torch.bool, device=device)
    ones = torch.ones(rows, 1, dtype=mask.dtype, device=device)
    tokens: list[Tensor] = []
    for step in range(max_new_tokens):
        scores = processors(seen, logits)
        suppressed = step < sampling.min_new_tokens  # no row can end at this step
        if suppressed:
            scores.index_fill_(1, eos, -float("inf"))
        chosen = scores.argmax(dim=-1) if sampling.greedy else draw(scores)
        if not suppressed:
            chosen = chosen.masked_fill(ended, pad_token_id)
            ended |= torch.isin(chosen, eos)
        tokens.append(chosen)
        if step + 1 == max_new_tokens or not suppressed and bool(ended.all()):
            break
        if processors:
            seen = torch.cat([seen, chosen.unsqueeze(1)], dim=1)
        if steps is not None:
            logits = steps.step(chosen, position)
        else:
            mask = torch.cat([mask, ones], dim=1)
            out = network(
                input_ids=chosen.unsqueeze(1),
                attention_mask=mask,
                position_ids=position,
                use_cache=True,
                **cache_argument(cache),
            )
            logits = out.logits[:, -1, :].float()
        position = position + 1
    return torch.stack(tokens, dim=1)


def reserve(cache: object, new_tokens: int) -> None:
    """Give every plain growing layer of a transformers key/value cache room for `new_tokens`
    more positions, so a decoding step writes its keys and values in place instead of
    copying the whole cache into a new tensor (what `DynamicLayer.update` does). Layers of
    other kinds (sliding windows, linear attention) and caches without layers stay as they
    are."""
    try:
        from transformers.cache_utils import DynamicLayer
    except ImportError:  # a transformers without per-layer caches
        return
    for layer in getattr(cache, "layers", []):
        if type(layer) is DynamicLayer and layer.is_initialized and layer.keys.dim() == 4:
            _reserve_layer(layer, new_tokens)


def _reserve_layer(layer: object, new_tokens: int) -> None:
    keys, values = layer.keys, layer.values
    filled = keys.size(-2)
    key_room = keys.new_empty(*keys.shape[:-2], filled + new_tokens, keys.size(-1))
    value_room = values.new_empty(*values.shape[:-2], filled + new_tokens, values.size(-1))
    key_room[..., :filled, :] = keys
    value_room[..., :filled, :] = values

    def update(key_states: Tensor, value_states: Tensor, *args: object, **kwargs: object):
        nonlocal filled
        end = filled + key_states.size(-2)
        key_room[..., filled:end, :] = key_states
        value_room[..., filled:end, :] = value_states
        filled = end
        layer.keys, layer.values = key_room[..., :end, :], value_room[..., :end, :]
        return layer.keys, layer.values

    layer.keys, layer.values = key_room[..., :filled, :], value_room[..., :filled, :]
    layer.update = update
