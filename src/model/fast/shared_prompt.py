"""Fast path `shared_prompt`: continuations of the same prompt read it once.

The G completions of a group share their prompt. Scoring them as G full sequences runs the
prompt G times; here each distinct prompt runs once with the network's own key/value cache,
the cache rows are copied to each continuation (`copy_to_rows`, gradients flow back through
the copies), and the continuations run on top. This relies on the network taking
the cache it is handed and attending over it: a transformers release that renamed the cache
keyword once made the attention drop it, so continuations attended only to themselves. The
probe (`check_shared_prompt`) compares the logits with the full sequences' on a probe batch
before first use; on a difference the full sequences run. In a half type the two orders of the
same arithmetic differ by about what the type's rounding moves the full sequences from
float32's, so the tolerance there is `FLOAT32_FACTOR` times that (`shared_tolerance`), as for
the decoding paths.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from functools import partial
from typing import Any

import torch
from torch import Tensor, nn

from src.model.fast.half_rounding import HALF_FLOOR, float32_yardstick
from src.model.fast.probe import (
    computed_dtype,
    log_softmax_difference,
    probe_forward,
    probe_input,
    proven,
)
from src.model.hf_cache import cache_argument, returned_cache
from src.model.positions import position_ids

# forward(**kwargs) -> a causal LM output with `.logits` (the network, or its compiled forward)
Forward = Callable[..., Any]
# count -> the keywords that keep only the last `count` positions' logits (or none)
KeepLogits = Callable[[int], dict[str, int]]


def continue_prompts(
    forward: Forward,
    network: nn.Module,
    keep_logits: KeepLogits,
    prompt_ids: Tensor,
    prompt_mask: Tensor,
    owner: Tensor,
    ids: Tensor,
    mask: Tensor,
) -> tuple[Tensor, Tensor]:
    """Logits of continuations `ids` [N, T] (`mask` 1 on real tokens) after the distinct
    left-padded prompts [U, P], row n continuing prompt owner[n]. Returns the logits of each
    row's last prompt position [N, 1, V] (they predict the first continuation token) and
    those of its continuation positions [N, T, V]. Each prompt runs once where the probe has
    proven that for this network; otherwise every row runs whole."""
    check = partial(check_shared_prompt, network, keep_logits)
    if proven("shared_prompt", network, check, shared_tolerance(network)):
        return cached_continuations(forward, keep_logits, prompt_ids, prompt_mask, owner, ids, mask)
    return full_continuations(forward, keep_logits, prompt_ids, prompt_mask, owner, ids, mask)


def cached_continuations(
    forward: Forward,
    keep_logits: KeepLogits,
    prompt_ids: Tensor,
    prompt_mask: Tensor,
    owner: Tensor,
    ids: Tensor,
    mask: Tensor,
) -> tuple[Tensor, Tensor]:
    """`continue_prompts` with each prompt run once and its cache copied to its rows."""
    prompt = forward(
        input_ids=prompt_ids,
        attention_mask=prompt_mask,
        position_ids=position_ids(prompt_mask),
        use_cache=True,
        **keep_logits(1),
    )
    cache = returned_cache(prompt)
    copy_to_rows(cache, owner, prompt_ids.size(0))
    row_mask = prompt_mask[owner]
    positions = row_mask.sum(dim=1, keepdim=True)
    positions = positions + torch.arange(ids.size(1), device=positions.device)
    logits = forward(
        input_ids=ids,
        attention_mask=torch.cat([row_mask, mask], dim=1),
        position_ids=positions,
        use_cache=False,
        **cache_argument(cache),
        **keep_logits(ids.size(1)),
    ).logits
    return prompt.logits[owner, -1:, :], logits


def copy_to_rows(cache: Any, owner: Tensor, prompts: int) -> None:
    """Give each row of `owner` its own prompt's keys and values in `cache`, which holds the
    `prompts` prompts'. Where every prompt is followed by the same number of its rows (a
    rollout's groups), the cache is repeated row by row: its backward sums each prompt's rows,
    where selecting the rows by index accumulates them one index at a time, several times
    slower."""
    repeats = owner.numel() // prompts
    in_groups = torch.arange(prompts, device=owner.device).repeat_interleave(repeats)
    if owner.numel() == prompts * repeats and torch.equal(owner, in_groups):
        cache.batch_repeat_interleave(repeats)
    else:
        cache.batch_select_indices(owner)


def full_continuations(
    forward: Forward,
    keep_logits: KeepLogits,
    prompt_ids: Tensor,
    prompt_mask: Tensor,
    owner: Tensor,
    ids: Tensor,
    mask: Tensor,
) -> tuple[Tensor, Tensor]:
    """`continue_prompts` the plain way: every row's prompt and continuation as one sequence."""
    full_mask = torch.cat([prompt_mask[owner], mask], dim=1)
    logits = forward(
        input_ids=torch.cat([prompt_ids[owner], ids], dim=1),
        attention_mask=full_mask,
        position_ids=position_ids(full_mask),
        use_cache=False,
        **keep_logits(ids.size(1) + 1),
    ).logits[:, -ids.size(1) - 1 :, :]
    return logits[:, :1, :], logits[:, 1:, :]


def shared_tolerance(network: nn.Module) -> Callable[[], float] | None:
    """The tolerance of `check_shared_prompt` on `network`: None (the probe's) in float32 and
    float64; in a half type `FLOAT32_FACTOR` times what its arithmetic moves the probe's full
    sequences from float32's (`float32_rounding`), at least `HALF_FLOOR`, measured once per
    kind of network. The fixed half-type tolerance refused the right cache on SmolLM2-135M
    and on Gemma 3 270M with an adapter (0.10 and 0.25 against 0.05), where bfloat16's own
    rounding moves those sequences by more."""
    if computed_dtype(network) not in (torch.bfloat16, torch.float16):
        return None

    def measured() -> float:
        forward, _, continued = probe_forward(network)
        arguments = {**forward, "use_cache": False}  # compared: the last prompt position on
        moved = float32_yardstick("shared_float32_rounding", network, arguments, continued + 1)
        return max(HALF_FLOOR, moved)

    return measured


@torch.no_grad()
def check_shared_prompt(network: nn.Module, keep_logits: KeepLogits) -> float:
    """The largest difference, after log-softmax, between the cached and the full logits of
    the probe batch (2 prompts, 2 continuations each). A LoRA network is checked with its
    adapter off: what is checked is how attention takes the cache, which the adapters of the
    linear layers do not touch, and the base runs in a third of the time."""
    prompt_ids, prompt_mask, ids = probe_input(network)
    owner = torch.arange(prompt_ids.size(0), device=ids.device)
    owner = owner.repeat_interleave(ids.size(0) // prompt_ids.size(0))
    mask = torch.ones_like(ids)
    args = (network, keep_logits, prompt_ids, prompt_mask, owner, ids, mask)
    base_only = (
        network.disable_adapter()
        if hasattr(network, "disable_adapter")
        else contextlib.nullcontext()
    )
    with base_only:
        fast_last, fast = cached_continuations(*args)
        plain_last, plain = full_continuations(*args)
    return max(log_softmax_difference(fast_last, plain_last), log_softmax_difference(fast, plain))
