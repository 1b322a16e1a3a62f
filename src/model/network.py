"""What the GRPO and SFT modules ask of the network they train, declared once.

A network is any `nn.Module` (so Lightning moves and checkpoints it) that provides the methods
below: the causal LM of `src.model.causal_lm` today, a masked character model tomorrow. The
modules call only these, so a new kind of network plugs in without an edit to `src/grpo/`.
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any, Protocol

import torch
from torch import Tensor, nn


class Sequences(Protocol):
    """Prompt and completion tokens to score, row by row; a rollout is one."""

    prompt_ids: Tensor  # [N, P] left-padded prompt tokens
    prompt_mask: Tensor  # [N, P] 1 on real prompt tokens
    completion_ids: Tensor  # [N, T] completion tokens, right-padded
    completion_mask: Tensor  # [N, T] 1 on the completion tokens that count
    action_mask: Tensor  # [N, T] 1 on those the policy wrote (less any a tool inserted): scored
    reveal_steps: Tensor | None  # [N, T] a masked model's denoising step per token; None: one step


class Scorer(Protocol):
    """Anything that gives per-token log-probs of completions: a policy or its reference."""

    def log_probs(
        self, sequences: Sequences, temperature: float = 1.0, with_entropy: bool = False
    ) -> tuple[Tensor, Tensor | None]:
        """Log-probs [N, T] of each completion token given what precedes it, and the entropy
        [N, T] of each token's distribution when asked (without gradient)."""
        ...


class PolicyNetwork(Scorer, Protocol):
    """The trained network: scores completions, encodes text, names what is trained, saves."""

    tokenizer: Any  # turns text into the ids the network reads; roles use its chat template

    def encode_prompts(self, prompts: list[str]) -> dict[str, Tensor]:
        """`input_ids` and `attention_mask` of the prompts, left-padded, on the network's device."""
        ...

    def encode_completions(self, texts: list[str]) -> tuple[Tensor, Tensor]:
        """Ids and mask of target completions (end marker appended), right-padded, on the
        network's device: what supervised training teaches."""
        ...

    def frozen_reference(self) -> Scorer:
        """The policy as it is now, frozen: what a KL term pulls the trained policy back to."""
        ...

    def trainable_parameters(self) -> list[nn.Parameter]:
        """The parameters an optimizer updates (a LoRA adapter's only, under LoRA)."""
        ...

    def save(self, path: str | Path, merge: bool = True) -> Path:
        """Write a folder the model config can load again; return it."""
        ...


class AdaptedNetwork(PolicyNetwork, Protocol):
    """A trained adapter on a frozen base: roles that run frozen models (a rewriter's planner
    and generator) use the base, inside `adapter_disabled`, to write or to pick an option."""

    def continuation_scores(
        self, contexts: list[str], continuations: list[list[str]]
    ) -> list[list[float]]:
        """Mean log-prob per token of each continuation after its context (how a frozen
        generator picks an option), without gradient, the contexts as one batch."""
        ...

    def adapter_disabled(self) -> AbstractContextManager[None]:
        """Within the block the network computes as its base model (the adapter off); a network
        without an adapter is its own base."""
        ...


class DecodedNetwork(PolicyNetwork, Protocol):
    """A policy network that a token-by-token sampler (hf, vLLM) decodes: the transformers
    network itself, how prompts are cut and where completions end."""

    network: nn.Module  # the transformers causal LM (a peft model over one under LoRA)
    max_prompt_length: int | None  # prompts are cut from the left beyond this many tokens
    compute_dtype: torch.dtype  # what decoding computes in (a half type: under autocast)

    @property
    def keeps_few_logits(self) -> bool:
        """Whether the network's forward takes `logits_to_keep`."""
        ...

    @property
    def eos_token_ids(self) -> list[int]:
        """The token ids that end a completion."""
        ...

    @property
    def uses_lora(self) -> bool:
        """Whether a LoRA adapter is what trains (vLLM then loads the adapter, not the weights)."""
        ...
