"""Sampling a masked character model: every masked position drawn at once, or revealed over
several denoising steps, the positions the model is surest of first."""

from __future__ import annotations

import torch
from torch import Tensor

from src.recipes.char_diffusion.encoder import PAD
from src.recipes.char_diffusion.network import CharDiffusionNetwork, masked_positions, revealed
from src.rollout.rollout import Rollout


class CharDiffusionSampler:
    """A `Sampler` for `CharDiffusionNetwork`: G fill-ins per masked window. Each denoising
    step predicts every position still masked from the window as revealed so far, draws a
    character there (temperature and nucleus, or the argmax when greedy) and keeps the
    ceil(left / steps left) draws the model gives the highest probability; the rest are masked
    again for the next step. One step draws every position independently. A completion is the
    drawn characters, left to right, and the rollout carries the step of each
    (`reveal_steps`), from which the network recomputes its log-probabilities."""

    def __init__(
        self,
        max_completion_length: int,
        temperature: float = 0.8,
        top_p: float = 0.95,
        denoising_steps: int = 1,
    ) -> None:
        if temperature <= 0:
            raise ValueError(f"temperature must be > 0, got {temperature}; use greedy=True instead")
        if not 0 < top_p <= 1:
            raise ValueError(f"top_p must be in (0, 1], got {top_p}")
        self.max_completion_length = max_completion_length
        self.temperature = temperature
        self.top_p = top_p
        self.denoising_steps = denoising_steps

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
            ids, steps, valid = self.draw(network, prompt_ids, greedy)
        finally:
            network.train(was_training)
        tokenizer = network.tokenizer
        return Rollout(
            prompt_ids=prompt_ids,
            prompt_mask=prompt_mask,
            completion_ids=ids,
            completion_mask=valid.long(),
            is_clipped=torch.zeros(ids.size(0), dtype=torch.bool, device=ids.device),
            completions=[tokenizer.decode(row) for row in ids.cpu()],
            reveal_steps=steps if self.denoising_steps > 1 else None,
        )

    def draw(
        self, network: CharDiffusionNetwork, prompt_ids: Tensor, greedy: bool
    ) -> tuple[Tensor, Tensor, Tensor]:
        """The characters [N, M] drawn at each row's masked positions (PAD past a row's
        last), the denoising step [N, M] that kept each, and the mask [N, M] of real ones."""
        index, valid = masked_positions(prompt_ids)
        window = prompt_ids
        ids = torch.full_like(index, PAD)
        steps = torch.zeros_like(index)
        hidden = valid.clone()
        for step in range(self.denoising_steps):
            logits = network.logits_at(window, index)
            if greedy:
                drawn = logits.argmax(dim=-1)
                probs = torch.softmax(logits, dim=-1)
            else:
                drawn = nucleus_sample(logits / self.temperature, self.top_p)
                probs = torch.softmax(logits / self.temperature, dim=-1)
            left = self.denoising_steps - step
            kept = surest(probs.gather(-1, drawn.unsqueeze(-1)).squeeze(-1), hidden, left)
            ids = torch.where(kept, drawn, ids)
            steps = torch.where(kept, step, steps)
            hidden = hidden & ~kept
            if step + 1 < self.denoising_steps:
                window = revealed(window, index, drawn, kept)
        return ids, steps, valid


def surest(sureness: Tensor, hidden: Tensor, steps_left: int) -> Tensor:
    """Mask [N, M] of the ceil(hidden / steps_left) hidden positions of each row with the
    highest `sureness` (ties: the leftmost first); with one step left, every hidden one."""
    take = torch.div(hidden.sum(dim=1) + steps_left - 1, steps_left, rounding_mode="floor")
    score = sureness.masked_fill(~hidden, -1.0)
    order = torch.sort(score, dim=1, descending=True, stable=True).indices
    rank = torch.empty_like(order).scatter_(
        1, order, torch.arange(order.size(1), device=order.device).expand_as(order)
    )
    return hidden & (rank < take.unsqueeze(1))


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
