"""Dense retrieval: documents embedded once by a document encoder, queries by a query encoder,
ranked by inner product (cosine similarity when the encoders normalise their vectors)."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import torch

from src.model.embedding import SentenceEmbedder
from src.retrieval.corpus import Document
from src.retrieval.dense_settings import DenseSettings
from src.retrieval.hit import Hit
from src.utils.errors import ConfigError, MissingFileError

log = logging.getLogger(__name__)
EMBEDDINGS_FILE = "embeddings.pt"
IDS_FILE = "ids.json"


class DenseIndex:
    """Document embeddings computed in batches once, saved as one tensor file, searched with
    `torch.topk` over query-document inner products.

    One model serves both sides for MiniLM (`packaged:all-MiniLM-L6-v2`, mean pooling,
    normalised: cosine). MedCPT uses two (ncbi/MedCPT-Query-Encoder, ncbi/MedCPT-Article-Encoder,
    cls pooling, unnormalised: dot product). A document is encoded as the text
    `title + " " + content`, or, with `title_pair=True`, as the tokenizer pair
    (title, content), which is how MedCPT's article encoder was trained. `pooling` and
    `normalize` apply to both encoders. Encoders load on first use: a cached index needs only
    the query encoder.
    """

    def __init__(self, encoding: DenseSettings | None = None) -> None:
        self.encoding = encoding or DenseSettings()
        self.device = self.encoding.device or ("cuda" if torch.cuda.is_available() else "cpu")
        self._embedders: dict[str, SentenceEmbedder] = {}
        self._embeddings: torch.Tensor | None = None
        self._documents: list[Document] = []

    def settings(self) -> dict[str, Any]:
        """The settings the saved document embeddings depend on (the cache key is made of
        these); query-side settings and the batch size change no saved file."""
        return {
            "document_encoder": self.encoding.document_encoder,
            "pooling": self.encoding.pooling,
            "normalize": self.encoding.normalize,
            "document_max_length": self.encoding.document_max_length,
            "title_pair": self.encoding.title_pair,
        }

    def build(self, documents: list[Document]) -> None:
        """Embed every document with the document encoder, `batch_size` at a time."""
        encoder = self._embedder(self.encoding.document_encoder, "document_encoder")
        if self.encoding.title_pair:
            texts, pairs = [d.title for d in documents], [d.content for d in documents]
        else:
            texts, pairs = [d.text for d in documents], None
        self._embeddings = encoder(
            texts,
            pairs,
            batch_size=self.encoding.batch_size,
            max_length=self.encoding.document_max_length,
        )
        self._documents = list(documents)

    def save(self, folder: str | Path) -> None:
        """Write the document embeddings (one tensor file) and their document ids to `folder`."""
        folder = Path(folder)
        embeddings = self._require()
        torch.save(embeddings, folder / EMBEDDINGS_FILE)
        (folder / IDS_FILE).write_text(json.dumps([d.id for d in self._documents]))

    def load(self, folder: str | Path, documents: list[Document]) -> None:
        """Read embeddings saved by `save` for exactly these documents (the ids must match)."""
        folder = Path(folder)
        saved_ids = json.loads((folder / IDS_FILE).read_text())
        embeddings = torch.load(folder / EMBEDDINGS_FILE, weights_only=True)
        if saved_ids != [d.id for d in documents] or embeddings.shape[0] != len(documents):
            raise ValueError(f"{folder}: the saved embeddings were computed for other documents")
        self._embeddings = embeddings
        self._documents = list(documents)

    def search(self, queries: list[str], k: int) -> list[list[Hit]]:
        """The top `k` documents (capped at the corpus size) for each query by inner product,
        all queries encoded and scored in one batched pass."""
        embeddings = self._require()
        k = min(k, len(self._documents))
        if not queries or k <= 0:
            return [[] for _ in queries]
        encoder = self._embedder(self.encoding.query_encoder, "query_encoder")
        vectors = encoder(
            queries, batch_size=self.encoding.batch_size, max_length=self.encoding.query_max_length
        )
        if vectors.shape[-1] != embeddings.shape[-1]:
            raise ConfigError(
                f"retrieval.dense.query_encoder={self.encoding.query_encoder} gives {vectors.shape[-1]}-d "
                f"vectors but the documents were embedded in {embeddings.shape[-1]} dimensions "
                "by retrieval.dense.document_encoder; use a matching pair of encoders"
            )
        scores, indices = torch.topk(vectors @ embeddings.T, k, dim=-1)
        return [
            [
                Hit(self._documents[index], score)
                for index, score in zip(row_indices.tolist(), row_scores.tolist(), strict=True)
            ]
            for row_indices, row_scores in zip(indices, scores, strict=True)
        ]

    def _embedder(self, name: str, key: str) -> SentenceEmbedder:
        """The encoder called `name`, loaded once and shared when both sides name one model."""
        if name not in self._embedders:
            try:
                self._embedders[name] = SentenceEmbedder(
                    name,
                    self.encoding.pooling,
                    normalize=self.encoding.normalize,
                    device=self.device,
                )
            except MissingFileError as error:
                raise MissingFileError(f"retrieval.dense.{key}: {error}") from error
            log.info("Loaded %s encoder %s on %s", key.split("_")[0], name, self.device)
        return self._embedders[name]

    def _require(self) -> torch.Tensor:
        if self._embeddings is None:
            raise RuntimeError("DenseIndex: call build() or load() first")
        return self._embeddings
