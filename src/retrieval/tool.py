"""A retriever as a search tool: the text a multi-turn rollout inserts for each query."""

from __future__ import annotations

from src.retrieval.hit import documents_text
from src.retrieval.retriever import Retriever


class PassageTool:
    """For each query, its top `k` passages, one per line as `passage_template` writes them."""

    def __init__(
        self, retriever: Retriever, k: int, passage_template: str = "[{rank}] {title}: {content}"
    ) -> None:
        self.retriever = retriever
        self.k = k
        self.passage_template = passage_template

    def __call__(self, queries: list[str]) -> list[str]:
        """The passages' text of each query; a blank query finds nothing and gets ''."""
        asked = [i for i, query in enumerate(queries) if query.strip()]
        texts = [""] * len(queries)
        found = self.retriever.search([queries[i] for i in asked], self.k) if asked else []
        for i, hits in zip(asked, found, strict=True):
            texts[i] = documents_text(hits, self.passage_template)
        return texts
