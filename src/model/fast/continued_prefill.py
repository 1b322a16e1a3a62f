"""Fast path `continued_prefill`: rows that continue shared prompts with tokens of their own (a
multi-turn rollout's later turns: the prompt, the row's turns so far, the passages inserted)
read each prompt once, not once per row.

The plain way reads every row's whole context as a prompt of its own: G rows of one question
read its prompt G times. Here the B prompts run once, and each row's cache takes its prompt's
keys and values; then one pass over the rows' last columns computes the rest. The layout keeps
every row's tokens contiguous and ends them all at one column, padding only at the left, as a
whole-context prefill would: a sliding layer's window in columns stays its window in
positions, and decoding goes on from the same column for every row.

    row r:  [padding][ prompt's first tokens: keys and values placed ][ last S columns: run ]
            column 0                                              C              C + S = width

The last S columns hold each row's last S tokens (S: the longest own suffix, at least one):
the suffix, and where it is shorter the end of the prompt, computed again there with the
placed columns before them. Before its first use on a kind of network, the probe decodes a
probe batch of rows with uneven prompts and suffixes this way for a few teacher-forced steps
and compares the logits with one forward of the network over the whole sequences.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor, nn

from src.model.fast.half_rounding import HALF_FLOOR, float32_yardstick
from src.model.fast.probe import (
    computed_dtype,
    device_of,
    log_softmax_difference,
)
from src.model.positions import position_ids
from src.model.steps import RowContexts


@dataclass(frozen=True)
class ContinuedLayout:
    """Where each row's tokens go (module docstring): the block of the last `size` columns,
    its token ids [R, S] and positions [R, S], which of the `width` columns are real [R,
    width], and for the placed columns the prompt column each reads ([R, C])."""

    prompts: Tensor  # [B'] the prompts some row continues: the only ones read
    owners: Tensor  # [R] each row's prompt, among `prompts`
    block_ids: Tensor  # [R, S] each row's last S tokens, left-padded
    block_positions: Tensor  # [R, S]
    real: Tensor  # [R, width] bool
    sources: Tensor  # [R, C] the prompt column placed in each column before the block
    width: int

    @classmethod
    def of(cls, contexts: RowContexts, pad_token_id: int) -> ContinuedLayout:
        """The layout of `contexts`' rows."""
        device = contexts.prompt_ids.device
        prompt_width = contexts.prompt_ids.size(1)
        used = sorted(set(contexts.owners))  # a later turn may leave whole groups out
        owners = torch.tensor([used.index(o) for o in contexts.owners], device=device)
        prompts = torch.tensor(used, device=device)
        prompt_lengths = contexts.prompt_mask[prompts].sum(dim=1)[owners]  # [R]
        suffix_lengths = torch.tensor([len(s) for s in contexts.suffixes], device=device)
        lengths = prompt_lengths + suffix_lengths
        width = int(lengths.max())
        size = max(1, int(suffix_lengths.max()))
        ids, _ = contexts.full(pad_token_id)  # [R, width]: every row's whole context
        columns = torch.arange(width, device=device).unsqueeze(0)
        start = (width - lengths).unsqueeze(1)  # each row's first real column
        placed = columns[:, : width - size]
        # a placed column's token is the prompt's at the same position: the prompt's own
        # column is shifted by its padding, this row's by its own
        shift = (prompt_width - prompt_lengths).unsqueeze(1) - start
        return cls(
            prompts=prompts,
            owners=owners,
            block_ids=ids[:, width - size :],
            block_positions=(columns[:, width - size :] - start).clamp(min=0),
            real=columns >= start,
            sources=(placed + shift).clamp(0, prompt_width - 1),
            width=width,
        )

    def placed(self, prompt_part: Tensor) -> Tensor:
        """The read prompts' keys or values [B', kv_heads, P, head_dim] in each row's columns
        before the block [R, kv_heads, C, head_dim] (a padding column gets some prompt
        column's: masked, never read)."""
        rows = prompt_part[self.owners]
        index = self.sources[:, None, :, None].expand(-1, rows.size(1), -1, rows.size(3))
        return rows.gather(2, index)


def probe_contexts(network: nn.Module, length: int) -> tuple[RowContexts, Tensor]:
    """Probe rows for `continued_prefill`: two prompts of `length` and `length` - 2 tokens,
    three rows (two of the first, one of the second) with own suffixes of 3, 1 and 5 tokens,
    and 3 tokens each to feed back [3, 3]. Seeded ids of their own."""
    vocab = network.get_input_embeddings().num_embeddings
    generator = torch.Generator().manual_seed(4321)
    ids = torch.randint(0, vocab, (2, length), generator=generator)
    mask = torch.ones_like(ids)
    mask[1, :2] = 0
    suffixes = [torch.randint(0, vocab, (n,), generator=generator).tolist() for n in (3, 1, 5)]
    fed = torch.randint(0, vocab, (3, 3), generator=generator)
    device = device_of(network)
    contexts = RowContexts(ids.to(device), mask.to(device), [0, 0, 1], suffixes)
    return contexts, fed.to(device)


def continued_difference(remade: Callable[[int], Any], network: nn.Module) -> float:
    """The largest difference, after log-softmax, between the logits of the probe rows read
    with `continued_prefill` (steps `remade(3)` for three rows, unpacked: the packed products
    are proven on their own) and decoded three steps with the probe's tokens fed back, and
    those of one forward of the network over the same sequences without a cache. The prompts
    are longer than the network's longest sliding window, so the windows are part of what is
    compared."""
    steps = remade(3)
    if steps is None:
        return float("inf")
    contexts, fed = probe_contexts(network, probe_length(steps))
    pad = 0
    _, mask = contexts.full(pad)
    position = mask.sum(dim=1, keepdim=True)
    fast = [steps.continued_prefill(contexts, pad, fed.size(1))]
    for k in range(fed.size(1) - 1):
        fast.append(steps.step(fed[:, k], position + k))
    plain = network(**whole_forward(contexts, fed)).logits[:, -fed.size(1) :]
    return log_softmax_difference(torch.stack(fast, dim=1), plain)


def continued_tolerance(
    remade: Callable[[int], Any], network: nn.Module
) -> Callable[[], float] | None:
    """The tolerance of `continued_prefill` on `network`: None (the probe's `TOLERANCE`) in
    float32 and float64; in a half type `FLOAT32_FACTOR` times what the half type's
    arithmetic moves the probe's whole sequences from float32's (`float32_rounding`: they
    are longer than the decoding probe's, and rounding grows with them), at least
    `HALF_FLOOR`, measured once per kind of network."""
    if computed_dtype(network) not in (torch.bfloat16, torch.float16):
        return None

    def measured() -> float:
        steps = remade(3)
        if steps is None:
            return HALF_FLOOR
        contexts, fed = probe_contexts(network, probe_length(steps))
        forward = whole_forward(contexts, fed)
        name = "continued_float32_rounding"
        return max(HALF_FLOOR, float32_yardstick(name, network, forward, fed.size(1)))

    return measured


def probe_length(steps: Any) -> int:
    """The probe prompts' length for `steps`: 4 tokens past the longest sliding window, at
    least 6."""
    windows = [layer.window for layer in steps.layers if layer.window is not None]
    return max([6, *(w + 4 for w in windows)])


def whole_forward(contexts: RowContexts, fed: Tensor) -> dict[str, Any]:
    """The arguments of the plain forward the continued prefill is compared with: each probe
    row's whole context and the tokens fed back but the last, without a cache, its logits
    kept for the fed positions only (not a vocabulary per position)."""
    ids, mask = contexts.full(0)
    whole_mask = torch.cat([mask, mask.new_ones(mask.size(0), fed.size(1) - 1)], dim=1)
    return {
        "input_ids": torch.cat([ids, fed[:, :-1]], dim=1),
        "attention_mask": whole_mask,
        "position_ids": position_ids(whole_mask),
        "use_cache": False,
        "logits_to_keep": fed.size(1),
    }
