"""Sampling with transformers `generate`: the default rollout backend, runs anywhere."""

from __future__ import annotations

import torch

from src.model.causal_lm import CausalLM
from src.rollout.rollout import Rollout, completion_mask
from src.rollout.sampler import check_sampling


class HFSampler:
    """A `Sampler` for transformers causal LMs: draws G completions per prompt with `generate`, left-padded, cut at the first EOS."""

    def __init__(
        self,
        max_completion_length: int,
        temperature: float = 1.0,
        top_p: float = 1.0,
        top_k: int = 0,
        repetition_penalty: float = 1.0,
    ) -> None:
        check_sampling(max_completion_length, temperature)
        self.max_completion_length = max_completion_length
        self.temperature = temperature
        self.top_p = top_p
        self.top_k = top_k
        self.repetition_penalty = repetition_penalty

    def sync(self, lm: CausalLM) -> None:
        """Nothing to do: `generate` runs the trained network itself."""

    @torch.no_grad()
    def sample(
        self, lm: CausalLM, prompts: list[str], group_size: int, greedy: bool = False
    ) -> Rollout:
        """G completions for each prompt; greedy decoding for evaluation."""
        tokenizer = lm.tokenizer
        encoded = lm.encode_prompts(prompts)
        prompt_ids = encoded["input_ids"].repeat_interleave(group_size, dim=0)
        prompt_mask = encoded["attention_mask"].repeat_interleave(group_size, dim=0)
        sampling = (
            {"do_sample": False}
            if greedy
            else {
                "do_sample": True,
                "temperature": self.temperature,
                "top_p": self.top_p,
                "top_k": self.top_k,
                "repetition_penalty": self.repetition_penalty,
            }
        )
        was_training = lm.network.training
        lm.network.eval()
        try:
            output = lm.network.generate(
                input_ids=prompt_ids,
                attention_mask=prompt_mask,
                max_new_tokens=self.max_completion_length,
                pad_token_id=tokenizer.pad_token_id,
                eos_token_id=lm.eos_token_ids,
                **sampling,
            )
        finally:
            lm.network.train(was_training)
        completion_ids = output[:, prompt_ids.size(1) :]
        mask, clipped = completion_mask(completion_ids, lm.eos_token_ids)
        completion_ids = completion_ids.masked_fill(mask == 0, tokenizer.pad_token_id)
        texts = tokenizer.batch_decode(completion_ids, skip_special_tokens=True)
        return Rollout(
            prompt_ids=prompt_ids,
            prompt_mask=prompt_mask,
            completion_ids=completion_ids,
            completion_mask=mask,
            is_clipped=clipped,
            completions=texts,
        )
