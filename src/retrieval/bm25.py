"""BM25 lexical retrieval with bm25s: lower-cased words, English stopwords removed, no stemming.

A term repeated in a query scores once by default (`repeated_terms="once"`): Okapi BM25's
query-term factor (k3 + 1) qtf / (k3 + qtf) with k3 = 0. bm25s, `rank_bm25` and Lucene's
boolean query of one clause per token (so Pyserini, whose bag-of-words query boosts a term by
its count) all add a term's score once per repeat instead (`"count"`): there a query that says
"enzyme enzyme enzyme" weighs that word three times, which a trained query writer learns to
exploit (docs/recipes/retrieval.md).
"""

from __future__ import annotations

import functools
import json
import re
from pathlib import Path
from typing import Any

from src.retrieval.corpus import Document
from src.retrieval.hit import Hit

TOKEN = re.compile(r"(?u)\b\w\w+\b")  # bm25s's default: words of two or more characters
IDS_FILE = "ids.json"


@functools.cache
def stopwords() -> frozenset[str]:
    """bm25s's English stopwords: what a search never matches on."""
    from bm25s.stopwords import STOPWORDS_EN

    return frozenset(STOPWORDS_EN)


def tokenize(text: str, stopwords: frozenset[str]) -> list[str]:
    """The lower-cased words of `text` without stopwords: what BM25 matches on, the same for
    documents and queries."""
    return [token for token in TOKEN.findall(text.lower()) if token not in stopwords]


class BM25Index:
    """A BM25 index over documents' titles and contents together, searched in one batched call.

    `k1` (term-frequency saturation) and `b` (length normalisation) are bm25s's Lucene
    variant's parameters; both shape the saved index, so both belong in its cache key.
    `repeated_terms` (`REPEATED_TERMS`) says how a term a query repeats is scored; it shapes
    searches only, not the index.
    """

    DEFAULTS: dict[str, Any] = {"k1": 1.5, "b": 0.75, "repeated_terms": "once"}

    def __init__(self, k1: float = 1.5, b: float = 0.75, repeated_terms: str = "once") -> None:
        self.k1 = float(k1)
        self.b = float(b)
        self.repeated_terms = repeated_terms
        self._stopwords = stopwords()
        self._model: Any = None
        self._documents: list[Document] = []

    def settings(self) -> dict[str, Any]:
        """The settings the saved index depends on (the cache key is made of these)."""
        return {"k1": self.k1, "b": self.b}

    def build(self, documents: list[Document]) -> None:
        """Tokenize and index `documents`; searching returns them by position in this list."""
        import bm25s

        tokens = [tokenize(document.text, self._stopwords) for document in documents]
        self._model = bm25s.BM25(k1=self.k1, b=self.b)
        self._model.index(tokens, show_progress=False)
        self._documents = list(documents)

    def save(self, folder: str | Path) -> None:
        """Write the index (bm25s's files) and the document ids it was built from to `folder`."""
        folder = Path(folder)
        self._require()
        self._model.save(str(folder), show_progress=False)
        (folder / IDS_FILE).write_text(json.dumps([d.id for d in self._documents]))

    def load(self, folder: str | Path, documents: list[Document]) -> None:
        """Read an index saved by `save` for exactly these documents (the ids must match)."""
        import bm25s

        folder = Path(folder)
        saved_ids = json.loads((folder / IDS_FILE).read_text())
        if saved_ids != [d.id for d in documents]:
            raise ValueError(f"{folder}: the saved BM25 index was built for other documents")
        self._model = bm25s.BM25.load(str(folder), load_vocab=True, show_progress=False)
        self._documents = list(documents)

    def search(self, queries: list[str], k: int) -> list[list[Hit]]:
        """The top `k` documents (capped at the corpus size) for each query, in one batched call.

        Only documents sharing at least one word with the query are hits (score > 0), so a query
        with no word in the index's vocabulary gets [] instead of an error.
        """
        self._require()
        vocabulary = self._model.vocab_dict
        known = [
            [token for token in self.query_terms(query) if token in vocabulary] for query in queries
        ]
        results: list[list[Hit]] = [[] for _ in queries]
        todo = [i for i, tokens in enumerate(known) if tokens]
        k = min(k, len(self._documents))
        if not todo or k <= 0:
            return results
        indices, scores = self._model.retrieve(
            [known[i] for i in todo], k=k, show_progress=False, n_threads=0
        )
        for row, i in enumerate(todo):
            results[i] = [
                Hit(self._documents[int(index)], float(score))
                for index, score in zip(indices[row], scores[row], strict=True)
                if score > 0
            ]
        return results

    def query_terms(self, query: str) -> list[str]:
        """The terms a search scores for `query`: its words, each once where `repeated_terms`
        is `once` (in the order first written)."""
        terms = tokenize(query, self._stopwords)
        return list(dict.fromkeys(terms)) if self.repeated_terms == "once" else terms

    def _require(self) -> None:
        if self._model is None:
            raise RuntimeError("BM25Index: call build() or load() first")
