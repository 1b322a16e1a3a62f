"""The dense index's settings (`retrieval.dense.*` in conf/retrieval/): its encoders, pooling and
lengths. Built once from the config's keys and checked against their declaration
(`src/retrieval/keys.py`); the index reads the fields."""

from __future__ import annotations

from dataclasses import dataclass

from src.model.embedding import PACKAGED_MINILM
from src.retrieval.keys import SETTINGS
from src.utils.setting import Declared


@dataclass(frozen=True)
class DenseSettings(Declared):
    """Each field is the `retrieval.dense.<field>` key of the same name; its comment in
    conf/retrieval/minilm.yaml says what it does. `device` None: cuda when there is one."""

    SECTION = "retrieval.dense"
    TABLE = SETTINGS

    query_encoder: str = PACKAGED_MINILM
    document_encoder: str = PACKAGED_MINILM
    pooling: str = "mean"
    normalize: bool = True
    query_max_length: int = 256
    document_max_length: int = 256
    title_pair: bool = False
    batch_size: int = 32
    device: str | None = None
