"""Sampling with a transformers causal LM: the default rollout backend, runs anywhere."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import torch
from torch import Tensor

from src.model.fast.decoding import decoding_steps
from src.model.fast.probe import device_of
from src.model.network import DecodedNetwork
from src.model.precision import computing
from src.model.steps import RowContexts, Steps
from src.rollout.decode import Drawn, Ending, Sampling, Stop, decode, decode_rows
from src.rollout.rollout import Rollout, completion_mask
from src.rollout.sampling_settings import SamplingSettings
from src.rollout.stops import first_mark, stop_at_marks


class HFSampler:
    """A `Sampler` for transformers causal LMs: G completions per prompt from one read of the
    prompt (`src.rollout.decode`), left-padded, cut at the first EOS. With `fused_steps` a
    Llama-family network decodes its new tokens through fused weights, LoRA merged in: on a
    GPU, in any float type, each step replayed as a CUDA graph
    (`src.model.fast.captured_steps`); on the CPU, in float32 (`src.model.fast.llama_steps`).
    With `packed_weights` float32 networks on the CPU decode with prepacked weights
    (`src.model.fast.packed`). Each runs only where its probe has proven it on the network
    (`src.model.fast.decoding`). A completion also ends at the first of `stop_strings` in its
    text (a base model writes on past its answer): the token that completes it is the last
    one kept, as an EOS would be."""

    def __init__(
        self, packed_weights: bool = True, fused_steps: bool = True, **sampling: Any
    ) -> None:
        """`sampling`: the sampling keys (`SamplingSettings`, checked there), kept as
        `self.sampling`; the `Sampler` and `TurnSampler` attributes are read from them."""
        self.sampling = SamplingSettings.of(sampling, "rollout=hf")
        self.max_completion_length = self.sampling.max_completion_length
        self.temperature = self.sampling.temperature
        self.stop_strings = list(self.sampling.stop_strings or ())
        self.packed_weights = packed_weights  # CPU float32: decode with packed, merged weights
        self.fused_steps = fused_steps  # Llama family: our own decoding step (CPU float32, GPU)

    @classmethod
    def more_keys(cls) -> set[str]:
        """The `rollout.*` keys its settings object reads (`SamplingSettings`), beyond its
        named parameters (the settings check's `runs/read_keys.py`)."""
        return SamplingSettings.more_keys()

    def sync(self, lm: DecodedNetwork) -> None:
        """Nothing to do: sampling runs the trained network itself."""

    @torch.no_grad()
    def new_tokens(
        self,
        lm: DecodedNetwork,
        input_ids: Tensor,
        attention_mask: Tensor,
        group_size: int,
        max_new_tokens: int,
        greedy: bool = False,
        stop: Stop | None = None,
    ) -> Drawn:
        """[B * G, <= max_new_tokens] tokens drawn after each of the B left-padded token
        prompts, G rows per prompt, pad after each row's first EOS or where `stop` ends it
        (what `sample` decodes, and a multi-turn rollout's first turn), with their log-probs
        under the distribution each was drawn from (`Drawn`; none for greedy decoding)."""
        rows = input_ids.size(0) * group_size
        with self._steps(lm, rows) as steps:
            return decode(
                steps,
                input_ids,
                attention_mask,
                group_size,
                self._sampling(greedy, max_new_tokens),
                Ending(max_new_tokens, lm.eos_token_ids, lm.tokenizer.pad_token_id, stop),
            )

    @torch.no_grad()
    def new_tokens_after(
        self,
        lm: DecodedNetwork,
        contexts: RowContexts,
        max_new_tokens: int,
        greedy: bool = False,
        stop: Stop | None = None,
    ) -> Drawn:
        """[R, <= max_new_tokens] tokens drawn after each row's context (a multi-turn
        rollout's later turns: its prompt, shared with the other rows of its group, then its
        own turns and inserted passages), each shared prompt read once where the decoding
        steps can (`decode_rows`), with their log-probs as `new_tokens` gives them."""
        with self._steps(lm, len(contexts.owners)) as steps:
            return decode_rows(
                steps,
                contexts,
                self._sampling(greedy, max_new_tokens),
                Ending(max_new_tokens, lm.eos_token_ids, lm.tokenizer.pad_token_id, stop),
            )

    def _sampling(self, greedy: bool, max_new_tokens: int) -> Sampling:
        """How each token is chosen: greedily, or with this sampler's settings."""
        if greedy:
            return Sampling(greedy=True)
        settings = self.sampling
        return Sampling(
            temperature=settings.temperature,
            top_p=settings.top_p,
            top_k=settings.top_k,
            repetition_penalty=settings.repetition_penalty,
            min_new_tokens=min(settings.min_completion_length, max_new_tokens),
        )

    @contextlib.contextmanager
    def _steps(self, lm: DecodedNetwork, rows: int) -> Iterator[Steps]:
        """The decoding steps for `rows` rows, the network in eval mode meanwhile."""
        was_training = lm.network.training
        lm.network.eval()
        try:
            with (
                computing(lm.compute_dtype, device_of(lm.network), lm.network),
                decoding_steps(
                    lm.network, rows, lm.keeps_few_logits, self.fused_steps, self.packed_weights
                ) as steps,
            ):
                yield steps
        finally:
            lm.network.train(was_training)

    @torch.no_grad()
    def sample(
        self, lm: DecodedNetwork, prompts: list[str], group_size: int, greedy: bool = False
    ) -> Rollout:
        """G completions for each prompt; greedy decoding for evaluation."""
        tokenizer = lm.tokenizer
        encoded = lm.encode_prompts(prompts)
        rows = encoded["input_ids"].size(0) * group_size
        stop = stop_at_marks(tokenizer, [self.stop_strings] * rows) if self.stop_strings else None
        drawn = self.new_tokens(
            lm,
            encoded["input_ids"],
            encoded["attention_mask"],
            group_size,
            self.max_completion_length,
            greedy,
            stop,
        )
        completion_ids = drawn.tokens
        prompt_ids = encoded["input_ids"].repeat_interleave(group_size, dim=0)
        prompt_mask = encoded["attention_mask"].repeat_interleave(group_size, dim=0)
        mask, clipped = completion_mask(completion_ids, lm.eos_token_ids)
        if self.stop_strings:
            mask, clipped = self._cut_at_stops(tokenizer, completion_ids, mask, clipped)
        completion_ids = completion_ids.masked_fill(mask == 0, tokenizer.pad_token_id)
        texts = tokenizer.batch_decode(completion_ids, skip_special_tokens=True)
        return Rollout(
            prompt_ids=prompt_ids,
            prompt_mask=prompt_mask,
            completion_ids=completion_ids,
            completion_mask=mask,
            is_clipped=clipped,
            completions=texts,
            sampler_logps=None if drawn.log_probs is None else drawn.log_probs * mask,
        )

    def _cut_at_stops(
        self, tokenizer: Any, completion_ids: Tensor, mask: Tensor, clipped: Tensor
    ) -> tuple[Tensor, Tensor]:
        """The completion mask ended after the token whose text completes a stop string (that
        row then ended, not clipped), for rows that hold one before their EOS."""
        mask, clipped = mask.clone(), clipped.clone()
        for row in range(completion_ids.size(0)):
            kept = int(mask[row].sum())
            count, found = first_mark(
                tokenizer, completion_ids[row, :kept].tolist(), self.stop_strings
            )
            if found is not None:
                mask[row, count:] = 0
                clipped[row] = False
        return mask, clipped
