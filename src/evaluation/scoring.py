"""Greedy answers of one model head on held-out rows: a record per row and a summary.

A record keeps the raw generation and the extracted answer next to the gold one, so a
researcher can read why a head scored what it did (`eval_results.jsonl`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from rich.progress import Progress

from src.evaluation.greedy import GreedyScorer
from src.model.network import PolicyNetwork

Extractor = Callable[[str], str | None]


def score_head(
    head: str,
    network: PolicyNetwork,
    scorer: GreedyScorer,
    rows: list[dict[str, Any]],
    batch_size: int,
    extract: Extractor | None = None,
    answer_field: str = "answer",
) -> tuple[list[dict[str, Any]], dict[str, float]]:
    """Greedy-decode every row with `network`; return per-row records (with what the role did,
    e.g. a rewriter's queries and documents) and mean scores (and `role/<key>` means)."""
    records: list[dict[str, Any]] = []
    scorer.means()  # start from nothing
    with Progress(transient=True) as progress:
        task = progress.add_task(f"eval {head}", total=len(rows))
        for start in range(0, len(rows), batch_size):
            batch = rows[start : start + batch_size]
            episode = scorer.score(network, batch)
            lengths = episode.rollout.lengths.tolist()
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
                        **episode.details[i],
                    }
                )
            progress.update(task, advance=len(batch))
    count = len(records)
    tokens = sum(record["completion_tokens"] for record in records) / count if count else 0.0
    return records, {"rows": float(count), **scorer.means(), "completion_tokens": tokens}
