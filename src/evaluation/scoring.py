"""Greedy answers of one model head on held-out rows: a record per row and a summary.

A record keeps the raw generation and the extracted answer next to the gold one, so a
researcher can read why a head scored what it did (`eval_results.jsonl`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from rich.progress import Progress

from src.data.mcq import LETTERS
from src.evaluation.greedy import GreedyScorer
from src.model.network import PolicyNetwork

Extractor = Callable[[str], str | None]
# details a role reports that say whether what the answerer read holds the gold answer: the
# rewriter's documents, the searcher's inserted passages
GOLD_READ_DETAILS = ("gold_retrieved", "gold_in_information")


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
                        "outcome": episode.outcomes[i],
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
    means = {"rows": float(count), **scorer.means(), "completion_tokens": tokens}
    return records, {**means, **gold_split(records), **answer_positions(records)}


def gold_split(records: list[dict[str, Any]], score: str = "accuracy") -> dict[str, float]:
    """`score`'s mean over the rows whose answerer read the gold answer (`GOLD_READ_DETAILS`)
    and over the others, and their gap: whether the passages decide the answer. Empty where
    the records carry no such detail or no `score`; a side with no rows is left out (its
    gap too)."""
    key = next((name for name in GOLD_READ_DETAILS if records and name in records[0]), None)
    if key is None or score not in records[0]:
        return {}
    sides: dict[str, list[float]] = {"gold_read": [], "gold_unread": []}
    for record in records:
        sides["gold_read" if record[key] else "gold_unread"].append(float(record[score]))
    split = {f"{score}/{side}": sum(v) / len(v) for side, v in sides.items() if v}
    if len(split) == 2:
        split[f"{score}/gold_gap"] = split[f"{score}/gold_read"] - split[f"{score}/gold_unread"]
    return split


def answer_positions(records: list[dict[str, Any]]) -> dict[str, float]:
    """The share of rows whose answer is the most frequent option letter: a head that answers
    one position whatever the question shows as a share near 1 (0.25 is spread evenly over
    four options). Empty where the outcomes are not option letters."""
    letters = [str(record.get("outcome") or "") for record in records]
    counts = [letters.count(letter) for letter in LETTERS]
    if not any(counts):
        return {}
    return {"largest_position_share": max(counts) / len(records)}
