"""One pass of a role over rows: prompts -> completions -> outcomes -> rewards."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from src.model.network import PolicyNetwork
from src.policy.role import Role
from src.reward.combine import CombinedReward
from src.rollout.rollout import Rollout
from src.rollout.sampler import Sampler
from src.utils.timing import phase


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
    details: list[dict[str, Any]]  # [N] what the role did per completion (queries, documents...)


def run_episode(
    network: PolicyNetwork,
    sampler: Sampler,
    role: Role,
    reward: CombinedReward,
    rows: list[dict[str, Any]],
    group_size: int,
    greedy: bool = False,
) -> Episode:
    """Sample G completions per row and score what the role makes of them; the phases
    (sampling, reward, and the role's own) are timed when a `phase_timer` is active."""
    prompts = role.prompts(rows, network.tokenizer)
    with phase("sampling"):
        rollout = sampler.sample(network, prompts, group_size, greedy=greedy)
    expanded = [row for row in rows for _ in range(group_size)]
    outcomes = role.outcomes(rollout.completions, expanded, network)
    with phase("reward"):
        scores = reward(outcomes.texts, expanded)
    return Episode(
        prompts,
        rollout,
        expanded,
        outcomes.texts,
        scores.total,
        scores.parts,
        scores.errors,
        outcomes.details,
    )


def detail_means(details: list[dict[str, Any]]) -> dict[str, float]:
    """`role/<key>`: the mean of every numeric (or true/false) value the role reported per
    completion, e.g. how many queries a rewriter wrote or whether a passage held the answer."""
    return {name: float(found.mean()) for name, found in detail_values(details).items()}


def detail_values(details: list[dict[str, Any]]) -> dict[str, Tensor]:
    """`role/<key>`: every numeric (or true/false) value the role reported under that key,
    one per completion that reported it."""
    values: dict[str, list[float]] = {}
    for detail in details:
        for key, value in detail.items():
            if isinstance(value, bool | int | float):
                values.setdefault(key, []).append(float(value))
    return {
        f"role/{key}": torch.tensor(found, dtype=torch.float64) for key, found in values.items()
    }
