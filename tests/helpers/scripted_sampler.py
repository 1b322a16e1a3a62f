"""A sampler whose completions depend only on the prompt, for tests that compare runs.

Real sampling draws from the random generator, so one process sampling a batch and two
processes sampling its halves draw different completions. `ScriptedSampler` picks completion
j of a prompt from a generator seeded by the prompt's text and j: whichever process holds the
prompt, in whatever order, it gets the same tokens, so the runs can be compared step by step.
Select it with `rollout._target_=tests.helpers.scripted_sampler.ScriptedSampler`.
"""

from __future__ import annotations

import random
import zlib
from typing import Any

import torch

from src.model.causal_lm import CausalLM
from src.rollout.rollout import Rollout, completion_mask


class ScriptedSampler:
    """Completions of 1 to `max_completion_length` tokens drawn from a generator seeded by
    the prompt and the completion's index; some end before the limit with EOS."""

    def __init__(self, max_completion_length: int, temperature: float = 1.0, **_: Any) -> None:
        self.max_completion_length = max_completion_length
        self.temperature = temperature

    def sync(self, lm: CausalLM) -> None:
        """The script reads no weights."""

    def tokens(self, prompt: str, index: int, vocabulary: int, eos: int) -> list[int]:
        """Completion `index` of `prompt`: the same on every call and every process."""
        draw = random.Random(zlib.crc32(f"{index}|{prompt}".encode()))
        length = draw.randint(1, self.max_completion_length)
        ids = [draw.randrange(3, vocabulary) for _ in range(length)]
        return ids if length == self.max_completion_length else [*ids[: length - 1], eos]

    @torch.no_grad()
    def sample(
        self, lm: CausalLM, prompts: list[str], group_size: int, greedy: bool = False
    ) -> Rollout:
        tokenizer = lm.tokenizer
        encoded = lm.encode_prompts(prompts)
        eos, pad = lm.eos_token_ids[0], tokenizer.pad_token_id
        vocabulary = min(len(tokenizer), lm.network.config.vocab_size)
        rows = [
            self.tokens(prompt, 0 if greedy else j, vocabulary, eos)
            for prompt in prompts
            for j in range(group_size)
        ]
        width = max(len(row) for row in rows)
        ids = torch.full((len(rows), width), pad, dtype=torch.long)
        for i, row in enumerate(rows):
            ids[i, : len(row)] = torch.tensor(row)
        mask, clipped = completion_mask(ids, lm.eos_token_ids)
        ids = ids.masked_fill(mask == 0, pad).to(encoded["input_ids"].device)
        return Rollout(
            prompt_ids=encoded["input_ids"].repeat_interleave(group_size, dim=0),
            prompt_mask=encoded["attention_mask"].repeat_interleave(group_size, dim=0),
            completion_ids=ids,
            completion_mask=mask.to(ids.device),
            is_clipped=clipped,
            completions=tokenizer.batch_decode(ids, skip_special_tokens=True),
        )
