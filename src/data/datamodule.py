"""The LightningDataModule every recipe uses: rows of dicts in, batches of rows out."""

from __future__ import annotations

import logging
import random
from collections.abc import Callable
from typing import Any

import lightning as L
import torch
from torch.utils.data import DataLoader, RandomSampler

from src.data.files import DataFileError, read_rows, require_fields

log = logging.getLogger(__name__)


def keep_rows(batch: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Collate function: a batch is the list of its rows, untouched."""
    return batch


def step_loader(
    rows: list[dict[str, Any]], batch_size: int, num_batches: int, seed: int
) -> DataLoader:
    """`num_batches` random batches of rows in one pass, so a progress bar counts steps."""
    order = RandomSampler(
        rows, num_samples=num_batches * batch_size, generator=torch.Generator().manual_seed(seed)
    )
    return DataLoader(rows, batch_size=batch_size, sampler=order, collate_fn=keep_rows)


class PromptDataModule(L.LightningDataModule):
    """Train and held-out rows from a built-in source or a local file.

    `path` (a local JSON/JSONL/Parquet file) takes precedence over `source`; `val_path` gives
    a separate held-out file, otherwise the first `val_size` rows after a seeded shuffle are
    held out. Training batches are drawn at random for `num_batches` steps, so the progress
    bar counts optimizer steps rather than epochs.
    """

    def __init__(
        self,
        source: Callable[[], list[dict[str, Any]]] | None = None,
        path: str | None = None,
        val_path: str | None = None,
        required_fields: list[str] = ("question", "answer"),
        val_size: int = 256,
        batch_size: int = 16,
        eval_batch_size: int = 64,
        num_batches: int = 1000,
        seed: int = 0,
    ) -> None:
        super().__init__()
        if source is None and path is None:
            raise ValueError("data needs either a built-in source or data.path")
        if batch_size < 1 or eval_batch_size < 1:
            raise ValueError("data.batch_size and data.eval_batch_size must be >= 1")
        self.source = source
        self.path = path
        self.val_path = val_path
        self.required_fields = list(required_fields)
        self.val_size = val_size
        self.batch_size = batch_size
        self.eval_batch_size = eval_batch_size
        self.num_batches = num_batches
        self.seed = seed
        self.train_rows: list[dict[str, Any]] = []
        self.val_rows: list[dict[str, Any]] = []

    def prepare_rows(self) -> None:
        """Load and split the rows once; safe to call again."""
        if self.train_rows:
            return
        if self.path is not None:
            rows = read_rows(self.path)
            require_fields(rows, self.required_fields, str(self.path))
            source_name = str(self.path)
        else:
            rows = self.source()
            source_name = "built-in data source"
        if self.val_path is not None:
            val_rows = read_rows(self.val_path)
            require_fields(val_rows, self.required_fields, str(self.val_path))
            train_rows = rows
        else:
            if self.path is not None:
                rows = list(rows)
                random.Random(self.seed).shuffle(rows)
            val_rows, train_rows = rows[: self.val_size], rows[self.val_size :]
        if not train_rows:
            raise DataFileError(
                f"{source_name}: no training rows left after holding out {len(val_rows)} "
                f"(data.val_size={self.val_size}); lower data.val_size or add rows"
            )
        if not val_rows:
            raise DataFileError(
                f"{source_name}: the held-out split is empty; set data.val_size > 0"
            )
        self.train_rows, self.val_rows = train_rows, val_rows
        log.info("Data: %d training rows, %d held-out rows", len(train_rows), len(val_rows))

    def setup(self, stage: str | None = None) -> None:
        self.prepare_rows()

    def train_dataloader(self) -> DataLoader:
        return step_loader(self.train_rows, self.batch_size, self.num_batches, self.seed)

    def val_dataloader(self) -> DataLoader:
        return DataLoader(
            self.val_rows, batch_size=self.eval_batch_size, shuffle=False, collate_fn=keep_rows
        )
