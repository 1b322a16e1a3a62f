"""Sampling a masked character model: every masked position drawn at once, in one forward pass."""

from __future__ import annotations

import torch
from torch import Tensor

from src.model.char_diffusion import CharDiffusionNetwork
from src.model.char_encoder import PAD
from src.rollout.rollout import Rollout


class CharDiffusionSampler:
    """A `Sampler` for `CharDiffusionNetwork`: G fill-ins per masked window, each masked
    position drawn independently from the network's prediction there (temperature, nucleus),
    or its argmax when greedy. A completion is the drawn characters, left to right."""

    def __init__(
        self, max_completion_length: int, temperature: float = 0.8, top_p: float = 0.95
    ) -> None:
        if temperature <= 0:
            raise ValueError(f"temperature must be > 0, got {temperature}; use greedy=True instead")
        if not 0 < top_p <= 1:
            raise ValueError(f"top_p must be in (0, 1], got {top_p}")
        self.max_completion_length = max_completion_length
        self.temperature = temperature
        self.top_p = top_p

    def sync(self, network: CharDiffusionNetwork) -> None:
        """Nothing to do: sampling runs the trained network itself."""

    @torch.no_grad()
    def sample(
        self,
        network: CharDiffusionNetwork,
        prompts: list[str],
        group_size: int,
        greedy: bool = False,
    ) -> Rollout:
        """G fill-ins for each masked window, rows i*G .. i*G+G-1 for window i."""
        encoded = network.encode_prompts(prompts)
        prompt_ids = encoded["input_ids"].repeat_interleave(group_size, dim=0)
        prompt_mask = encoded["attention_mask"].repeat_interleave(group_size, dim=0)
        was_training = network.training
        network.eval()
        try:
            logits, valid = network.masked_logits(prompt_ids)
        finally:
            network.train(was_training)
        if greedy:
            ids = logits.argmax(dim=-1)
        else:
            ids = nucleus_sample(logits / self.temperature, self.top_p)
        ids = ids.masked_fill(~valid, PAD)
        tokenizer = network.tokenizer
        return Rollout(
            prompt_ids=prompt_ids,
            prompt_mask=prompt_mask,
            completion_ids=ids,
            completion_mask=valid.long(),
            is_clipped=torch.zeros(ids.size(0), dtype=torch.bool, device=ids.device),
            completions=[tokenizer.decode(row) for row in ids.cpu()],
        )


def nucleus_sample(logits: Tensor, top_p: float) -> Tensor:
    """One draw per position of logits [..., V], from the smallest set of ids whose
    probability reaches `top_p` (the likeliest id always stays)."""
    probs = torch.softmax(logits.float(), dim=-1)
    if top_p < 1:
        sorted_probs, order = probs.sort(dim=-1, descending=True)
        before = sorted_probs.cumsum(dim=-1) - sorted_probs  # mass of the likelier ids
        sorted_probs = sorted_probs.masked_fill(before >= top_p, 0.0)
        probs = torch.zeros_like(probs).scatter(-1, order, sorted_probs)
    flat = probs.reshape(-1, probs.size(-1))
    return torch.multinomial(flat, 1).view(probs.shape[:-1])
