"""The retriever's keys (`retrieval.*`, conf/retrieval/): the backend and how many documents a
search returns. Each key's type, range and choices, beside the code that reads it;
`src.runs.schema` assembles every folder's table and checks a composed config against them."""

from __future__ import annotations

from src.retrieval.bm25 import REPEATED_TERMS
from src.retrieval.retriever import BACKENDS
from src.utils.setting import AnyOf, Setting, choice, number, whole

# key -> what it may hold; what each means is said beside it in its config
SETTINGS: dict[str, Setting | AnyOf] = {
    # retrieval
    "retrieval.k": whole(1),
    "retrieval.backend": choice(*BACKENDS),
    "retrieval.bm25.k1": number(0),
    "retrieval.bm25.b": number(0, 1),
    "retrieval.bm25.repeated_terms": choice(*REPEATED_TERMS),
}
