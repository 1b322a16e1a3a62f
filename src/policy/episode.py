"""One pass of a role over rows: prompts -> completions -> outcomes -> rewards."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from src.model.network import PolicyNetwork
from src.policy.role import Role
from src.reward.combine import CombinedReward
from src.rollout.rollout import Rollout, join_rollouts, teacher_forced
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

    def groups(self, keep: Tensor, group_size: int) -> Episode:
        """The episode restricted to the groups (prompts) where `keep` [B] is True."""
        rows = keep.repeat_interleave(group_size)
        index = rows.nonzero().flatten().tolist()
        return Episode(
            prompts=[
                prompt for prompt, kept in zip(self.prompts, keep.tolist(), strict=True) if kept
            ],
            rollout=self.rollout.select(rows.to(self.rollout.completion_ids.device)),
            rows=[self.rows[i] for i in index],
            outcomes=[self.outcomes[i] for i in index],
            rewards=self.rewards[index],
            reward_parts={name: part[index] for name, part in self.reward_parts.items()},
            reward_errors=self.reward_errors,
            details=[self.details[i] for i in index],
        )


def join_episodes(episodes: list[Episode], pad_token_id: int) -> Episode:
    """The groups of `episodes` one after another; reward errors are counted over all of them."""
    if len(episodes) == 1:
        return episodes[0]
    errors: dict[str, int] = {}
    for episode in episodes:
        for name, count in episode.reward_errors.items():
            errors[name] = errors.get(name, 0) + count
    return Episode(
        prompts=[prompt for episode in episodes for prompt in episode.prompts],
        rollout=join_rollouts([episode.rollout for episode in episodes], pad_token_id),
        rows=[row for episode in episodes for row in episode.rows],
        outcomes=[text for episode in episodes for text in episode.outcomes],
        rewards=torch.cat([episode.rewards for episode in episodes]),
        reward_parts={
            name: torch.cat([episode.reward_parts[name] for episode in episodes])
            for name in episodes[0].reward_parts
        },
        reward_errors=errors,
        details=[detail for episode in episodes for detail in episode.details],
    )


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
        if role.reads_completions():
            rollout = sampler.sample(network, prompts, group_size, greedy=greedy)
        else:  # nothing the role would read: every completion is EOS alone
            repeated = [prompt for prompt in prompts for _ in range(group_size)]
            rollout = teacher_forced(network, repeated, [""] * len(repeated))
    expanded = [row for row in rows for _ in range(group_size)]
    outcomes = role.outcomes(rollout.completions, expanded, network)
    with phase("reward"):
        scores = reward(outcomes.texts, expanded, rollout.lengths.tolist(), outcomes.details)
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
