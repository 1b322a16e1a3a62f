"""A retriever as a search tool: the text a multi-turn rollout inserts for each query, and the
ids of the passages it inserted (what a run's samples table shows of each search)."""

from __future__ import annotations

import zlib
from collections import OrderedDict

from src.retrieval.hit import Hit, documents_text, holds
from src.retrieval.retriever import Retriever
from src.utils.recent import keep_recent


class PassageTool:
    """For each query, its top `k` passages, one per line as `passage_template` writes them.
    It remembers the top `depth` hits (at least `k`) of the last `remembered` distinct queries
    (`hits_of`, `ids_of`): a deeper list places a gold passage the search did not insert."""

    def __init__(
        self,
        retriever: Retriever,
        k: int,
        passage_template: str = "[{rank}] {title}: {content}",
        remembered: int = 4096,
        depth: int = 0,
    ) -> None:
        self.retriever = retriever
        self.k = k
        self.depth = max(k, depth)
        self.passage_template = passage_template
        self.remembered = remembered
        self.found: OrderedDict[str, list[Hit]] = OrderedDict()

    def __call__(self, queries: list[str]) -> list[str]:
        """The passages' text of each query; a blank query finds nothing and gets ''."""
        asked = [i for i, query in enumerate(queries) if query.strip()]
        texts = [""] * len(queries)
        found = self.retriever.search([queries[i] for i in asked], self.depth) if asked else []
        for i, hits in zip(asked, found, strict=True):
            texts[i] = documents_text(hits[: self.k], self.passage_template)
            self.remember(queries[i], hits)
        return texts

    def holding(self, text: str) -> Hit | None:
        """The passage that holds `text`: of the top `depth` hits for `text` itself, the first
        titled `text`, else the first whose title or content holds it (case aside); None where
        none does. What a searcher reads for a row marked `oracle` (its gold answer's passage,
        whatever it searched: `among`)."""
        wanted = text.strip().lower()
        if not wanted:
            return None
        hits = self.retriever.search([text], self.depth)[0]
        titled = [hit for hit in hits if hit.document.title.strip().lower() == wanted]
        holding = [hit for hit in hits if holds(hit, wanted)]
        return next(iter(titled or holding), None)

    def among(self, query: str, gold: Hit) -> str:
        """`k` passages written as a search's are, `gold` one of them and the others the top
        hits `query` found when last asked (RAFT's oracle context with distractors: the reader
        has to tell the gold passage from what the search brought, not copy the first one).
        Its place among them is fixed by the query and the passage, so every completion of a
        group that searched alike reads the same text; with `k` 1 it is `gold` alone."""
        others = [hit for hit in self.hits_of(query) or [] if hit.document.id != gold.document.id]
        others = others[: self.k - 1]
        place = zlib.crc32(f"{query}\n{gold.document.id}".encode()) % (len(others) + 1)
        return documents_text([*others[:place], gold, *others[place:]], self.passage_template)

    def remember(self, query: str, hits: list[Hit]) -> None:
        """Keep `hits` as what `query` found, forgetting the oldest query past `remembered`."""
        keep_recent(self.found, query, list(hits), self.remembered)

    def ids_of(self, query: str) -> list[str] | None:
        """The ids of the passages `query` inserted when last asked; None when not remembered
        (a blank query, or one asked too long ago)."""
        hits = self.hits_of(query)
        return None if hits is None else [hit.document.id for hit in hits[: self.k]]

    def hits_of(self, query: str) -> list[Hit] | None:
        """The top `depth` hits `query` found when last asked, best first (the first `k` were
        inserted); None when not remembered."""
        return self.found.get(query)
