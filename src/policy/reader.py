"""The reader role (LAPDOG-style): the trained model answers from passages retrieved for the
row; its answer is the outcome, scored against the reference answer.

The query of a row does not change during training, so its passages are retrieved once, in
`prepare`, and kept in the row (`passages`, `passage_ids`).
"""

from __future__ import annotations

import logging
import time
from typing import Any

from src.model.network import PolicyNetwork
from src.policy.generator import Generator
from src.policy.role import Outcomes
from src.retrieval.hit import documents_text
from src.retrieval.retriever import Retriever
from src.utils.errors import ConfigError

log = logging.getLogger(__name__)


class Reader(Generator):
    """Prompts hold the row's top-`k` passages for the `query_field` text (the `{passages}`
    field of `template`, each written with `passage_template`); the rest is the generator's."""

    def __init__(
        self,
        retriever: Retriever,
        k: int = 3,
        query_field: str = "question",
        passage_template: str = "[{rank}] {title}: {content}",
        **generator: Any,
    ) -> None:
        super().__init__(**generator)
        self.retriever = retriever
        self.k = k
        self.query_field = query_field
        self.passage_template = passage_template

    def prepare(self, network: PolicyNetwork, rows: list[dict[str, Any]]) -> dict[str, float]:
        """Retrieve each row's passages once (rows that have them already are skipped)."""
        started = time.perf_counter()
        todo = [row for row in rows if "passages" not in row]
        if todo:
            missing = [row for row in todo if self.query_field not in row]
            if missing:
                raise ConfigError(
                    f"policy.query_field={self.query_field!r} is not a field of the data rows; "
                    f"row fields are {sorted(missing[0])}"
                )
            found = self.retriever.search([str(row[self.query_field]) for row in todo], self.k)
            for row, hits in zip(todo, found, strict=True):
                row["passage_ids"] = [hit.document.id for hit in hits]
                row["passages"] = documents_text(hits, self.passage_template)
        seconds = time.perf_counter() - started
        log.info("Reader: passages for %d rows retrieved in %.1f s", len(todo), seconds)
        return {"timing/retrieval": seconds} if todo else {}

    def outcomes(
        self,
        completions: list[str],
        rows: list[dict[str, Any]],
        network: PolicyNetwork | None = None,
    ) -> Outcomes:
        """The answer as written (response prefix included), with the passages it read."""
        outcomes = super().outcomes(completions, rows, network)
        outcomes.details = [{"passages": row.get("passage_ids", [])} for row in rows]
        return outcomes
