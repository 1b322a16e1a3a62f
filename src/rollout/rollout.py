"""The rollout: G sampled completions per prompt, as tensors and as text (a `Sequences`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import Tensor

from src.model.network import PolicyNetwork


@dataclass
class Rollout:
    """Completions of prompt i sit at rows i*G ... i*G+G-1 of every field."""

    prompt_ids: Tensor  # [N, P] left-padded prompt tokens
    prompt_mask: Tensor  # [N, P] 1 on real prompt tokens
    completion_ids: Tensor  # [N, T] sampled tokens, padded after the first EOS
    completion_mask: Tensor  # [N, T] 1 up to and including the first EOS
    is_clipped: Tensor  # [N] True where no EOS came before the length limit
    completions: list[str]  # decoded completions without special tokens
    # [N, T] the sampler's own log-probs of the sampled tokens; None when it reports none
    sampler_logps: Tensor | None = None
    # [N, T] the denoising step that drew each token (a masked model's sampler, in steps);
    # None: every token at once
    reveal_steps: Tensor | None = None
    # [N, T] 1 on tokens the environment inserted into the completion (a search's passages):
    # context the policy reads, not actions it took; None: the policy wrote every token
    inserted_mask: Tensor | None = None

    @property
    def lengths(self) -> Tensor:
        """Number of completion tokens the policy wrote per row, EOS included (inserted ones
        not: `max_completion_length` bounds these)."""
        return self.action_mask.sum(dim=1)

    @property
    def inserted_lengths(self) -> Tensor | None:
        """Number of inserted tokens per row; None where nothing can be inserted."""
        if self.inserted_mask is None:
            return None
        return (self.completion_mask * self.inserted_mask).sum(dim=1)

    @property
    def insertions(self) -> Tensor | None:
        """Number of inserted stretches per row (a search's answer is one); None where nothing
        can be inserted."""
        if self.inserted_mask is None:
            return None
        inserted = self.completion_mask * self.inserted_mask
        starts = inserted[:, 1:] * (1 - inserted[:, :-1])
        return inserted[:, 0] + starts.sum(dim=1)

    @property
    def action_mask(self) -> Tensor:
        """[N, T] 1 on the completion tokens the policy wrote: the completion mask less the
        inserted tokens. The loss, the KL, the entropy and the token counts that normalise
        them see only these; the inserted tokens are read as context."""
        if self.inserted_mask is None:
            return self.completion_mask
        return self.completion_mask * (1 - self.inserted_mask.to(self.completion_mask.dtype))

    def select(self, rows: Tensor) -> Rollout:
        """The rollout restricted to `rows` (a boolean mask), without the padding columns that
        only the other rows needed: leading prompt padding and trailing completion padding."""
        index = rows.nonzero().flatten()
        prompt_mask = self.prompt_mask[index]
        completion_mask = self.completion_mask[index]
        first = int(prompt_mask.any(dim=0).int().argmax())
        width = int(completion_mask.sum(dim=1).max())
        return Rollout(
            prompt_ids=self.prompt_ids[index, first:],
            prompt_mask=prompt_mask[:, first:],
            completion_ids=self.completion_ids[index, :width],
            completion_mask=completion_mask[:, :width],
            is_clipped=self.is_clipped[index],
            completions=[self.completions[i] for i in index.tolist()],
            sampler_logps=None if self.sampler_logps is None else self.sampler_logps[index, :width],
            reveal_steps=None if self.reveal_steps is None else self.reveal_steps[index, :width],
            inserted_mask=None if self.inserted_mask is None else self.inserted_mask[index, :width],
        )


def join_rollouts(rollouts: list[Rollout], pad_token_id: int) -> Rollout:
    """The rows of `rollouts` one after another (e.g. the groups several samplings kept), the
    prompts left-padded and the completions right-padded to the widest, with `pad_token_id`
    under a mask of 0."""
    prompt_width = max(part.prompt_ids.size(1) for part in rollouts)
    completion_width = max(part.completion_ids.size(1) for part in rollouts)

    def padded(tensor: Tensor, width: int, value: int, left: bool) -> Tensor:
        missing = width - tensor.size(1)
        return torch.nn.functional.pad(tensor, (missing, 0) if left else (0, missing), value=value)

    def optional(values: list[Tensor | None]) -> Tensor | None:
        """A field some parts may lack: None where every part lacks it, else zeros (every
        token at once; nothing inserted) for the parts that do."""
        if all(value is None for value in values):
            return None
        return torch.cat(
            [
                padded(
                    torch.zeros_like(part.completion_ids) if value is None else value,
                    completion_width,
                    0,
                    False,
                )
                for part, value in zip(rollouts, values, strict=True)
            ]
        )

    sampler_logps = [part.sampler_logps for part in rollouts]
    reveal_steps = [part.reveal_steps for part in rollouts]
    inserted = [part.inserted_mask for part in rollouts]
    return Rollout(
        prompt_ids=torch.cat(
            [padded(p.prompt_ids, prompt_width, pad_token_id, True) for p in rollouts]
        ),
        prompt_mask=torch.cat([padded(p.prompt_mask, prompt_width, 0, True) for p in rollouts]),
        completion_ids=torch.cat(
            [padded(p.completion_ids, completion_width, pad_token_id, False) for p in rollouts]
        ),
        completion_mask=torch.cat(
            [padded(p.completion_mask, completion_width, 0, False) for p in rollouts]
        ),
        is_clipped=torch.cat([part.is_clipped for part in rollouts]),
        completions=[text for part in rollouts for text in part.completions],
        sampler_logps=None
        if any(logps is None for logps in sampler_logps)
        else torch.cat([padded(logps, completion_width, 0, False) for logps in sampler_logps]),
        reveal_steps=optional(reveal_steps),
        inserted_mask=optional(inserted),
    )


def pad_rows(
    rows: Sequence[Sequence[float]], width: int, fill: float, dtype: torch.dtype
) -> Tensor:
    """Rows right-padded with `fill` (and cut) to `width` columns, as one tensor."""
    out = torch.full((len(rows), width), fill, dtype=dtype)
    for i, row in enumerate(rows):
        row = list(row)[:width]
        if row:
            out[i, : len(row)] = torch.tensor(row, dtype=dtype)
    return out


def teacher_forced(network: PolicyNetwork, prompts: list[str], targets: list[str]) -> Rollout:
    """The prompts with the given target completions, encoded as a rollout to score (what
    supervised training teaches: the targets' log-probs under the network)."""
    encoded = network.encode_prompts(prompts)
    target_ids, target_mask = network.encode_completions(targets)
    return Rollout(
        prompt_ids=encoded["input_ids"],
        prompt_mask=encoded["attention_mask"],
        completion_ids=target_ids,
        completion_mask=target_mask,
        is_clipped=torch.zeros(len(prompts), dtype=torch.bool),
        completions=targets,
    )


def completion_mask(completion_ids: Tensor, eos_token_id: int | list[int]) -> tuple[Tensor, Tensor]:
    """Mask that ends at the first EOS (kept), and which rows never produced one."""
    eos_ids = torch.as_tensor(eos_token_id, device=completion_ids.device).flatten()
    is_eos = torch.isin(completion_ids, eos_ids)
    length = completion_ids.size(1)
    has_eos = is_eos.any(dim=1)
    first_eos = torch.where(has_eos, is_eos.int().argmax(dim=1), length)
    positions = torch.arange(length, device=completion_ids.device).unsqueeze(0)
    return (positions <= first_eos.unsqueeze(1)).long(), ~has_eos
