"""A retrieved document with its score, and the merge of several queries' results into one list."""

from __future__ import annotations

from dataclasses import dataclass

from src.retrieval.corpus import Document


@dataclass(frozen=True)
class Hit:
    """One document a query retrieved and its score (higher is more relevant; BM25 scores and
    inner products are comparable only within one retriever)."""

    document: Document
    score: float


def holds(hit: Hit, text: str, with_title: bool = True) -> bool:
    """Whether the hit's content (its title too, `with_title`, read as `title: content`) holds
    `text`, which is lower-cased already: how a passage is found to hold a gold answer."""
    document = hit.document
    written = f"{document.title}: {document.content}" if with_title else document.content
    return text in written.lower()


def merge_hits(hit_lists: list[list[Hit]], k: int) -> list[Hit]:
    """The union of several queries' ranked hits, at most `k`, so that a reader given documents
    for several queries (sub-questions, rewrites) gets each document once, best first.

    Each document (by id) appears once, as its highest-scoring hit. Documents are ordered by
    their best rank in any list (rank 0 of every list comes before rank 1 of any list), then
    by their best score, higher first, then by the order of the lists they first appear in.
    So with two queries the top hit of each comes first, before either query's second hit.
    """
    best: dict[str, tuple[int, float, int, Hit]] = {}
    order = 0
    for hits in hit_lists:
        for rank, hit in enumerate(hits):
            key = hit.document.id
            if key not in best:
                best[key] = (rank, hit.score, order, hit)
                order += 1
                continue
            old_rank, old_score, first, old_hit = best[key]
            best[key] = (
                min(rank, old_rank),
                max(hit.score, old_score),
                first,
                hit if hit.score > old_score else old_hit,
            )
    ranked = sorted(best.values(), key=lambda entry: (entry[0], -entry[1], entry[2]))
    return [entry[3] for entry in ranked[: max(k, 0)]]


def documents_text(hits: list[Hit], template: str = "[{rank}] {title}: {content}") -> str:
    """Retrieved documents as a model reads them: one per line, `template` over the rank (from
    1), title and content."""
    return "\n".join(
        template.format(rank=rank, title=hit.document.title, content=hit.document.content)
        for rank, hit in enumerate(hits, start=1)
    )
