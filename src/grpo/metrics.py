"""What a rollout looked like, under TRL's metric names, and its rows for the samples table:
pure functions of an episode."""

from __future__ import annotations

import json
from typing import Any

import torch
from torch import Tensor

from src.policy.episode import Episode, detail_means


def rollout_metrics(episode: Episode, group_size: int) -> dict[str, float]:
    """Reward and completion statistics of one rollout of groups of `group_size`."""
    rewards = episode.rewards
    group_std = rewards.view(-1, group_size).std(dim=1)
    lengths = episode.rollout.lengths.float()
    clipped = episode.rollout.is_clipped.cpu()
    terminated = lengths[~clipped.to(lengths.device)]
    metrics = {
        "reward": float(rewards.mean()),
        "reward_std": float(group_std.mean()),
        "std_reward": float(rewards.std()) if rewards.numel() > 1 else 0.0,  # over all completions
        "frac_reward_zero_std": float(
            torch.isclose(group_std, torch.zeros_like(group_std)).float().mean()
        ),
        "completions/mean_length": float(lengths.mean()),
        "completions/min_length": float(lengths.min()),
        "completions/max_length": float(lengths.max()),
        "completions/clipped_ratio": float(clipped.float().mean()),
        "completions/mean_terminated_length": float(terminated.mean())
        if terminated.numel()
        else 0.0,
    }
    for name, scores in episode.reward_parts.items():
        metrics[f"rewards/{name}/mean"] = float(scores.mean())
        metrics[f"rewards/{name}/std"] = float(scores.std())
        metrics[f"rewards/{name}/errors"] = float(episode.reward_errors[name])
    metrics.update(detail_means(episode.details))
    return metrics


def sample_rows(
    episode: Episode, advantages: Tensor, group_size: int, step: int
) -> list[dict[str, Any]]:
    """One row per completion: step, prompt, completion, total reward, each part, advantage,
    and what the role did (its details)."""
    rows = []
    for i, completion in enumerate(episode.rollout.completions):
        prompt = episode.prompts[i // group_size]
        row = {"step": step, "prompt": prompt, "completion": completion}
        row["reward"] = float(episode.rewards[i])
        row.update({name: float(scores[i]) for name, scores in episode.reward_parts.items()})
        row["advantage"] = float(advantages[i])
        row.update({key: table_value(value) for key, value in episode.details[i].items()})
        rows.append(row)
    return rows


def table_value(value: Any) -> Any:
    """A detail as a table cell: numbers and text as they are, lists and dicts as JSON text."""
    if value is None or isinstance(value, str | int | float | bool):
        return value
    return json.dumps(value, ensure_ascii=False, default=str)
