"""One pass of a role over rows: prompts -> completions -> outcomes -> rewards."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from torch import Tensor

from src.model.network import PolicyNetwork
from src.policy.role import Role
from src.reward.combine import CombinedReward
from src.rollout.rollout import Rollout
from src.rollout.sampler import Sampler


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
    network: PolicyNetwork,
    sampler: Sampler,
    role: Role,
    reward: CombinedReward,
    rows: list[dict[str, Any]],
    group_size: int,
    greedy: bool = False,
) -> Episode:
    """Sample G completions per row and score what the role makes of them."""
    prompts = role.prompts(rows, network.tokenizer)
    rollout = sampler.sample(network, prompts, group_size, greedy=greedy)
    expanded = [row for row in rows for _ in range(group_size)]
    outcomes = role.outcomes(rollout.completions, expanded)
    scores = reward(outcomes, expanded)
    return Episode(prompts, rollout, expanded, outcomes, scores.total, scores.parts, scores.errors)
