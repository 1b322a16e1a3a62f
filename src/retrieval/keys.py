"""The retriever's keys (`retrieval.*`, conf/retrieval/): the backend and how many documents a
search returns. Each key's type, range and choices, beside the code that reads it;
`src.runs.schema` assembles every folder's table and checks a composed config against them."""

from __future__ import annotations

from src.model.embedding import POOLINGS
from src.utils.setting import FLAG, TEXT, AnyOf, Setting, choice, number, whole

BACKENDS = ("bm25", "dense")
REPEATED_TERMS = ("once", "count")  # how a query's repeated term scores: once, or once per repeat

# key -> what it may hold; what each means is said beside it in its config
SETTINGS: dict[str, Setting | AnyOf] = {
    # retrieval
    "retrieval.k": whole(1),
    "retrieval.backend": choice(*BACKENDS),
    "retrieval.bm25.k1": number(0),
    "retrieval.bm25.b": number(0, 1),
    "retrieval.bm25.repeated_terms": choice(*REPEATED_TERMS),
    "retrieval.dense.query_encoder": TEXT,
    "retrieval.dense.document_encoder": TEXT,
    "retrieval.dense.pooling": choice(*POOLINGS),
    "retrieval.dense.normalize": FLAG,
    "retrieval.dense.query_max_length": whole(1),
    "retrieval.dense.document_max_length": whole(1),
    "retrieval.dense.title_pair": FLAG,
    "retrieval.dense.batch_size": whole(1),
    "retrieval.dense.device": Setting("str", nullable=True),
}
