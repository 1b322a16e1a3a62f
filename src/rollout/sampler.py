"""What a sampling backend provides (hf, vLLM), declared once."""

from __future__ import annotations

from typing import Protocol

from src.model.network import PolicyNetwork
from src.rollout.rollout import Rollout


class Sampler(Protocol):
    """Draws G completions per prompt from a network; the settings the loss must agree with are
    declared attributes."""

    temperature: float  # sampling temperature; log-probs are taken at the same one
    max_completion_length: int  # new tokens per completion at most

    def sample(
        self, network: PolicyNetwork, prompts: list[str], group_size: int, greedy: bool = False
    ) -> Rollout:
        """G completions for each prompt, rows i*G .. i*G+G-1 for prompt i; greedy decoding
        (one answer per prompt, for evaluation) when asked."""
        ...

    def sync(self, network: PolicyNetwork) -> None:
        """Make the next samples come from the network's current weights; called after every
        optimizer step. A sampler that runs the network itself (hf) has nothing to do; one
        with its own copy of the weights (vLLM) loads the adapter or the weights here."""
        ...
