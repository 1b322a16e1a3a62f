"""One pass of a role over rows: prompts -> completions -> outcomes -> rewards."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from torch import Tensor

from src.model.causal_lm import CausalLM
from src.reward.combine import CombinedReward
from src.rollout.rollout import Rollout


class Role(Protocol):
    """What a policy role provides (generator, reader, rewriter)."""

    def prompts(self, rows: list[dict[str, Any]], tokenizer: Any = None) -> list[str]: ...

    def outcomes(self, completions: list[str], rows: list[dict[str, Any]]) -> list[str]: ...


class Sampler(Protocol):
    """What a rollout backend provides (hf, vllm)."""

    def sample(
        self, lm: CausalLM, prompts: list[str], group_size: int, greedy: bool = False
    ) -> Rollout: ...


@dataclass
class Episode:
    """Everything one pass produced; `rows` is repeated G times to align with completions."""

    prompts: list[str]
    rollout: Rollout
    rows: list[dict[str, Any]]
    outcomes: list[str]
    rewards: Tensor  # [N] weighted total
    reward_parts: dict[str, Tensor]  # [N] per reward function
    reward_errors: dict[str, int]  # outcomes a function failed on (scored 0, reward.on_error=zero)


def run_episode(
    lm: CausalLM,
    sampler: Sampler,
    role: Role,
    reward: CombinedReward,
    rows: list[dict[str, Any]],
    group_size: int,
    greedy: bool = False,
) -> Episode:
    """Sample G completions per row and score what the role makes of them."""
    prompts = role.prompts(rows, lm.tokenizer)
    rollout = sampler.sample(lm, prompts, group_size, greedy=greedy)
    expanded = [row for row in rows for _ in range(group_size)]
    outcomes = role.outcomes(rollout.completions, expanded)
    scores = reward(outcomes, expanded)
    return Episode(prompts, rollout, expanded, outcomes, scores.total, scores.parts, scores.errors)
