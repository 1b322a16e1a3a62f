"""Decoding steps: what the decoding loop asks of a network, one new token per row at a time.

`Steps` is the protocol; `ModuleSteps` runs it through the network's own forward and
key/value cache (any causal LM). The fast paths in `src.model.fast` provide quicker ones for
the networks they are proven on (`src.model.fast.decoding.decoding_steps` picks).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import torch
from torch import Tensor, nn

from src.model.fast.cache_room import reserve
from src.model.hf_cache import cache_argument, returned_cache
from src.model.positions import position_ids


@dataclass(frozen=True)
class RowContexts:
    """Rows that continue shared prompts with tokens of their own (a multi-turn rollout's
    later turns: the prompt, then the row's turns and inserted passages so far): row r reads
    prompt `owners[r]` of the B left-padded prompts [B, P], then `suffixes[r]`."""

    prompt_ids: Tensor
    prompt_mask: Tensor
    owners: list[int]
    suffixes: list[list[int]]

    def full(self, pad_token_id: int) -> tuple[Tensor, Tensor]:
        """Each row's whole context as one left-padded batch [R, L] and its attention mask."""
        prompts = unpadded_prompts(self.prompt_ids, self.prompt_mask)
        ids, mask = left_padded(
            [prompts[o] + list(s) for o, s in zip(self.owners, self.suffixes, strict=True)],
            pad_token_id,
        )
        return ids.to(self.prompt_ids.device), mask.to(self.prompt_ids.device)


def unpadded_prompts(prompt_ids: Tensor, prompt_mask: Tensor) -> list[list[int]]:
    """Each left-padded prompt row as the list of its real token ids."""
    return [ids[mask.bool()].tolist() for ids, mask in zip(prompt_ids, prompt_mask, strict=True)]


def left_padded(rows: list[list[int]], pad_token_id: int) -> tuple[Tensor, Tensor]:
    """Token rows as one left-padded batch [N, max length] and its attention mask."""
    width = max(len(row) for row in rows)
    ids = torch.full((len(rows), width), pad_token_id, dtype=torch.long)
    mask = torch.zeros(len(rows), width, dtype=torch.long)
    for i, row in enumerate(rows):
        if row:
            ids[i, width - len(row) :] = torch.tensor(row, dtype=torch.long)
            mask[i, width - len(row) :] = 1
    return ids, mask


class Steps(Protocol):
    """Decoding of B prompts with G rows each: `prefill` once, then `step` per new token; or
    of rows that continue shared prompts: `prefill_rows` once, then `step`. Logits come in
    the type the network computes in (float32, or the half type under `model.dtype`): the
    decoding loop widens them where it needs float32, and a half type's widening costs a
    copy of the vocabulary per row that the draw does without (`src.rollout.decode`)."""

    def prefill(
        self, prompt_ids: Tensor, prompt_mask: Tensor, group_size: int, new_tokens: int
    ) -> Tensor:
        """Read the B left-padded prompts [B, P], rows i*G .. i*G+G-1 continuing prompt i,
        with room for `new_tokens` more positions. Returns the logits [B, V] of each
        prompt's last position (they predict its first new token)."""
        ...

    def prefill_rows(self, contexts: RowContexts, pad_token_id: int, new_tokens: int) -> Tensor:
        """Read each row's context (`RowContexts`), with room for `new_tokens` more positions.
        Returns the logits [R, V] of each row's last position."""
        ...

    def step(self, tokens: Tensor, positions: Tensor) -> Tensor:
        """Logits [B * G, V] after `tokens` [B * G] at `positions` [B * G, 1]."""
        ...


def whole_contexts(
    steps: Steps, contexts: RowContexts, pad_token_id: int, new_tokens: int
) -> Tensor:
    """`prefill_rows` the plain way: every row's whole context read as a prompt of its own."""
    ids, mask = contexts.full(pad_token_id)
    return steps.prefill(ids, mask, 1, new_tokens)


class ModuleSteps:
    """`Steps` through the network's own forward and cache. With `make_room` the cache is
    allocated once for all new tokens (`src.model.fast.cache_room`, where proven)."""

    def __init__(
        self, network: nn.Module, keeps_few_logits: bool = True, make_room: bool = False
    ) -> None:
        self.network = network
        self.keeps_few_logits = keeps_few_logits  # whether the forward takes logits_to_keep
        self.make_room = make_room
        self.cache: object = None
        self.mask = torch.empty(0)

    def prefill(
        self, prompt_ids: Tensor, prompt_mask: Tensor, group_size: int, new_tokens: int
    ) -> Tensor:
        out = self.network(
            input_ids=prompt_ids,
            attention_mask=prompt_mask,
            position_ids=position_ids(prompt_mask),
            use_cache=True,
            **({"logits_to_keep": 1} if self.keeps_few_logits else {}),
        )
        self.cache = returned_cache(out)
        self.cache.batch_repeat_interleave(group_size)
        if self.make_room:
            reserve(self.cache, new_tokens)
        self.mask = prompt_mask.repeat_interleave(group_size, dim=0)
        return out.logits[:, -1, :]

    def prefill_rows(self, contexts: RowContexts, pad_token_id: int, new_tokens: int) -> Tensor:
        return whole_contexts(self, contexts, pad_token_id, new_tokens)

    def step(self, tokens: Tensor, positions: Tensor) -> Tensor:
        self.mask = torch.cat([self.mask, self.mask.new_ones(self.mask.size(0), 1)], dim=1)
        out = self.network(
            input_ids=tokens.unsqueeze(1),
            attention_mask=self.mask,
            position_ids=positions,
            use_cache=True,
            **cache_argument(self.cache),
        )
        return out.logits[:, -1, :]
