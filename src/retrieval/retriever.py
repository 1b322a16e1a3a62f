"""The `Retriever` protocol, and the retriever Hydra builds: a corpus, a backend, a cached index."""

from __future__ import annotations

import hashlib
import json
import logging
import shutil
import time
from pathlib import Path
from typing import Any, Protocol

from src.retrieval.bm25 import BM25Index
from src.retrieval.corpus import SAMPLE_CORPUS, Document, corpus_fingerprint, load_corpus
from src.retrieval.dense import DenseIndex
from src.retrieval.dense_settings import DenseSettings
from src.retrieval.hit import Hit
from src.utils.config import plain
from src.utils.errors import ConfigError
from src.utils.folders import check_writable, published_folder

log = logging.getLogger(__name__)
MANIFEST = "index.json"  # written last into a cache folder; its presence means complete
# What reading a damaged or half-written index raises: a file cut short (EOFError from numpy,
# ValueError from json), missing (OSError), or holding the wrong shapes or keys
DAMAGED_INDEX = (OSError, EOFError, ValueError, KeyError, IndexError, RuntimeError)


class Retriever(Protocol):
    """What a role or reward needs from retrieval: ranked documents for a batch of queries."""

    def check(self) -> None:
        """Load and check the corpus now, so a run fails on a bad corpus before models load."""
        ...

    def search(self, queries: list[str], k: int) -> list[list[Hit]]:
        """The best `k` hits (or fewer) for each query, best first, one list per query."""
        ...


class IndexedRetriever:
    """A corpus searched by a BM25 or dense index, built on first `search` and cached on disk,
    so that the jobs of a sweep and later runs with the same corpus and settings reuse it.

    `corpus`: a JSONL file of id/title/content rows or a folder of text files (None: the
    shipped medical-textbook sample). `k`: documents a reader gets per question after merging.
    The index lives in `cache_dir/<backend>-<key>/`, `key` being the first 16 hex digits of the
    sha256 of the corpus fingerprint and the settings the index depends on, as sorted JSON;
    `cache_dir=None` keeps it in memory only. `builds` counts the indexes this object built.
    """

    builds: int

    def __init__(
        self,
        corpus: str | None = None,
        backend: str = "bm25",
        k: int = 3,
        cache_dir: str | None = None,
        bm25: dict[str, Any] | None = None,
        dense: dict[str, Any] | None = None,
    ) -> None:
        self.corpus_path = Path(corpus) if corpus is not None else SAMPLE_CORPUS
        self.backend = backend
        self.k = k
        self.cache_dir = Path(cache_dir) if cache_dir is not None else None
        if backend == "bm25":
            self.index: BM25Index | DenseIndex = BM25Index(
                **_settings(bm25, BM25Index.DEFAULTS, "retrieval.bm25")
            )
        else:
            self.index = DenseIndex(DenseSettings.of(plain(dense) or {}, "retrieval=dense"))
        self.builds = 0
        self._documents: list[Document] | None = None
        self._by_id: dict[str, Document] = {}
        self._fingerprint: str | None = None
        self._ready = False

    def check(self) -> None:
        """Load and check the corpus (and that the cache folder is writable) now, so that a run
        fails on a missing or empty corpus before any model loads."""
        if self.cache_dir is not None:
            check_writable(self.cache_dir, "retrieval.cache_dir")
        _ = self.documents

    @property
    def documents(self) -> list[Document]:
        """The corpus, loaded and checked on first use."""
        if self._documents is None:
            self._documents = load_corpus(self.corpus_path)
            self._by_id = {document.id: document for document in self._documents}
        return self._documents

    def document(self, id: str) -> Document:
        """The corpus document with this id (KeyError when there is none)."""
        _ = self.documents
        return self._by_id[id]

    def cache_key(self) -> str:
        """16 hex digits naming the index of this corpus with these settings."""
        if self._fingerprint is None:
            self._fingerprint = corpus_fingerprint(self.documents)
        blob = self._fingerprint + json.dumps(self.index.settings(), sort_keys=True)
        return hashlib.sha256(blob.encode("utf-8")).hexdigest()[:16]

    def cache_folder(self) -> Path | None:
        """Where this corpus's index with these settings is cached (None without a cache)."""
        if self.cache_dir is None:
            return None
        return self.cache_dir / f"{self.backend}-{self.cache_key()}"

    def search(self, queries: list[str], k: int | None = None) -> list[list[Hit]]:
        """The best `k` (default `self.k`) hits for each query, best first, in one batched call;
        the first call loads the corpus and builds or loads the index."""
        self._prepare()
        return self.index.search(list(queries), self.k if k is None else k)

    def _prepare(self) -> None:
        if self._ready:
            return
        documents = self.documents
        folder = self.cache_folder()
        name = "BM25" if self.backend == "bm25" else "dense"
        if folder is not None and (folder / MANIFEST).is_file():
            try:
                manifest = json.loads((folder / MANIFEST).read_text())
                if manifest.get("documents") != len(documents):
                    raise ValueError(f"{MANIFEST} is not this corpus's")
                self.index.load(folder, documents)
            except DAMAGED_INDEX as error:
                log.warning(
                    "Cached %s index at %s is unusable (%s: %s); rebuilding",
                    name,
                    folder,
                    type(error).__name__,
                    error,
                )
            else:
                log.info(
                    "Loaded cached %s index of %d documents from %s", name, len(documents), folder
                )
                self._ready = True
                return
        start = time.perf_counter()
        self.index.build(documents)
        self.builds += 1
        seconds = time.perf_counter() - start
        if folder is None:
            log.info(
                "Built %s index of %d documents in %.1f s (not cached)",
                name,
                len(documents),
                seconds,
            )
        else:
            self._publish(folder, documents)
            log.info(
                "Built %s index of %d documents in %.1f s -> %s",
                name,
                len(documents),
                seconds,
                folder,
            )
        self._ready = True

    def _publish(self, folder: Path, documents: list[Document]) -> None:
        """Save the index into `folder` in one rename, replacing an incomplete or stale copy."""
        if folder.exists():
            shutil.rmtree(folder, ignore_errors=True)
        manifest = {
            "backend": self.backend,
            "settings": self.index.settings(),
            "corpus": str(self.corpus_path),
            "fingerprint": self._fingerprint or corpus_fingerprint(documents),
            "documents": len(documents),
        }
        with published_folder(folder) as scratch:
            self.index.save(scratch)
            (scratch / MANIFEST).write_text(json.dumps(manifest, indent=2, sort_keys=True))


def _settings(node: Any, defaults: dict[str, Any], key: str) -> dict[str, Any]:
    """`defaults` updated by a config node's values; an unknown name is a `ConfigError`."""
    given = plain(node) or {}
    if not isinstance(given, dict):
        raise ConfigError(f"{key} must be a mapping of settings, got {given!r}")
    unknown = sorted(set(given) - set(defaults))
    if unknown:
        raise ConfigError(
            f"{key}: unknown setting(s) {unknown}; known: {', '.join(sorted(defaults))}"
        )
    return {**defaults, **given}
