"""What a completion's search queries look like as a lexical search sees them: their terms (the
retriever's words: lower-cased, stopwords dropped), how many are distinct, and whether one is
repeated. A trained query writer that pads its queries with one word again and again shows here
(`repeats_term`, `repeated_term_share`), and `reward=query_repetition` penalises it."""

from __future__ import annotations

from collections import Counter
from typing import Any

from src.retrieval.bm25 import stopwords, tokenize


def query_terms(query: str) -> list[str]:
    """The terms of `query`, in order, repeats kept."""
    return tokenize(query, stopwords())


def query_shape(queries: list[str]) -> dict[str, Any]:
    """For one completion's queries: `repeats_term` (some query names a term twice),
    `query_terms` and `query_distinct_terms` (per query, their mean), and
    `repeated_term_share` (the share of all their terms that repeat a term of the same
    query). No queries: zeros and false."""
    counts = [Counter(query_terms(query)) for query in queries]
    total = sum(sum(count.values()) for count in counts)
    distinct = sum(len(count) for count in counts)
    return {
        "repeats_term": any(n > 1 for count in counts for n in count.values()),
        "query_terms": total / len(counts) if counts else 0.0,
        "query_distinct_terms": distinct / len(counts) if counts else 0.0,
        "repeated_term_share": (total - distinct) / total if total else 0.0,
    }
