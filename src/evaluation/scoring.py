"""Greedy answers of one model head on held-out rows: a record per row and a summary.

A record keeps the raw generation and the extracted answer next to the gold one, so a
researcher can read why a head scored what it did (`eval_results.jsonl`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from rich.progress import Progress

from src.model.causal_lm import CausalLM
from src.policy.episode import Role, Sampler, run_episode
from src.reward.combine import CombinedReward

Extractor = Callable[[str], str | None]


def score_head(
    head: str,
    lm: CausalLM,
    sampler: Sampler,
    role: Role,
    reward: CombinedReward,
    rows: list[dict[str, Any]],
    batch_size: int,
    extract: Extractor | None = None,
    answer_field: str = "answer",
) -> tuple[list[dict[str, Any]], dict[str, float]]:
    """Greedy-decode every row with `lm`; return per-row records and mean scores."""
    records: list[dict[str, Any]] = []
    with Progress(transient=True) as progress:
        task = progress.add_task(f"eval {head}", total=len(rows))
        for start in range(0, len(rows), batch_size):
            batch = rows[start : start + batch_size]
            with torch.no_grad():
                episode = run_episode(lm, sampler, role, reward, batch, 1, greedy=True)
            lengths = episode.rollout.completion_mask.sum(1).tolist()
            for i, row in enumerate(batch):
                records.append(
                    {
                        "head": head,
                        "index": start + i,
                        "id": row.get("id", start + i),
                        "question": row.get("question"),
                        "gold": row.get(answer_field),
                        "generation": episode.rollout.completions[i],
                        "extracted": extract(episode.outcomes[i]) if extract else None,
                        "completion_tokens": int(lengths[i]),
                        "reward": float(episode.rewards[i]),
                        **{name: float(part[i]) for name, part in episode.reward_parts.items()},
                    }
                )
            progress.update(task, advance=len(batch))
    return records, summarize(records, list(reward.functions))


def summarize(records: list[dict[str, Any]], names: list[str]) -> dict[str, float]:
    """Mean of every reward function and of the total over one head's records."""
    count = len(records)
    summary = {"rows": float(count)}
    for name in ["reward", *names, "completion_tokens"]:
        summary[name] = sum(record[name] for record in records) / count if count else 0.0
    return summary
