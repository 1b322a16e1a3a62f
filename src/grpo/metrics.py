"""What a rollout looked like, under TRL's metric names, and its rows for the samples table:
pure functions of an episode."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from src.policy.episode import Episode, detail_means
from src.utils.distributed import gather_objects, world_size


@dataclass
class RolloutRecord:
    """What the statistics of a rollout are computed from, per completion; on several
    processes `gathered` joins every process's rows, so the figures are the global batch's."""

    rewards: Tensor  # [N] total reward
    lengths: Tensor  # [N] counted completion tokens
    clipped: Tensor  # [N] True where no EOS came before the length limit
    parts: dict[str, Tensor]  # reward function -> [N] scores
    errors: dict[str, float]  # reward function -> completions it failed to score
    details: list[dict[str, Any]]  # what the role did, per completion
    inserted: Tensor | None = None  # [N] tokens a search inserted; None: a rollout without searches
    searches: Tensor | None = None  # [N] stretches inserted, one per search answered

    @classmethod
    def of(cls, episode: Episode) -> RolloutRecord:
        inserted, searches = episode.rollout.inserted_lengths, episode.rollout.insertions
        return cls(
            rewards=episode.rewards.detach().float().cpu(),
            lengths=episode.rollout.lengths.detach().cpu(),
            clipped=episode.rollout.is_clipped.detach().cpu(),
            parts={name: s.detach().float().cpu() for name, s in episode.reward_parts.items()},
            errors={name: float(count) for name, count in episode.reward_errors.items()},
            details=episode.details,
            inserted=None if inserted is None else inserted.detach().cpu(),
            searches=None if searches is None else searches.detach().cpu(),
        )

    def gathered(self) -> RolloutRecord:
        """Every process's rows in rank order (this record itself on one process)."""
        if world_size() == 1:
            return self
        records = gather_objects(self)
        return RolloutRecord(
            rewards=torch.cat([r.rewards for r in records]),
            lengths=torch.cat([r.lengths for r in records]),
            clipped=torch.cat([r.clipped for r in records]),
            parts={name: torch.cat([r.parts[name] for r in records]) for name in self.parts},
            errors={name: sum(r.errors[name] for r in records) for name in self.errors},
            details=[detail for r in records for detail in r.details],
            inserted=None
            if self.inserted is None
            else torch.cat([r.inserted for r in records if r.inserted is not None]),
            searches=None
            if self.searches is None
            else torch.cat([r.searches for r in records if r.searches is not None]),
        )


def tied_groups(rewards: Tensor, group_size: int) -> Tensor:
    """[B] True for the groups whose G rewards are all equal (standard deviation within 1e-8
    of 0): every advantage is 0 and the group teaches nothing (`frac_reward_zero_std`)."""
    group_std = rewards.float().view(-1, group_size).std(dim=1)
    return torch.isclose(group_std, torch.zeros_like(group_std))


def rollout_metrics(record: RolloutRecord, group_size: int) -> dict[str, float]:
    """Reward and completion statistics of one rollout of groups of `group_size`."""
    rewards = record.rewards
    group_std = rewards.view(-1, group_size).std(dim=1)
    lengths = record.lengths.float()
    clipped = record.clipped
    terminated = lengths[~clipped]
    metrics = {
        "reward": float(rewards.mean()),
        "reward_std": float(group_std.mean()),
        "std_reward": float(rewards.std()) if rewards.numel() > 1 else 0.0,  # over all completions
        "frac_reward_zero_std": float(tied_groups(rewards, group_size).float().mean()),
        "completions/mean_length": float(lengths.mean()),
        "completions/min_length": float(lengths.min()),
        "completions/max_length": float(lengths.max()),
        "completions/clipped_ratio": float(clipped.float().mean()),
        "completions/mean_terminated_length": float(terminated.mean())
        if terminated.numel()
        else 0.0,
    }
    if record.inserted is not None:  # a rollout in turns: what its searches inserted
        metrics["completions/mean_inserted_length"] = float(record.inserted.float().mean())
    if record.searches is not None:
        metrics["searches/mean"] = float(record.searches.float().mean())
        metrics["searches/none_share"] = float((record.searches == 0).float().mean())
    for name, scores in record.parts.items():
        metrics[f"rewards/{name}/mean"] = float(scores.mean())
        metrics[f"rewards/{name}/std"] = float(scores.std())
        metrics[f"rewards/{name}/errors"] = float(record.errors[name])
    metrics.update(detail_means(record.details))
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


def mean_figures(figures: list[dict[str, float]]) -> dict[str, float]:
    """Each figure's mean over the dicts that hold it (e.g. one per batch a step sampled)."""
    names = dict.fromkeys(name for part in figures for name in part)
    return {
        name: sum(part[name] for part in figures if name in part)
        / sum(1 for part in figures if name in part)
        for name in names
    }
