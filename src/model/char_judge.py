"""The judge of filled windows: a bidirectional character encoder with one logit, trained to
tell real text from corrupted text, and frozen as the reward of `task=char_diffusion`.

A judge built with `sees_mask` also reads which positions were filled: each window comes with
its masked version (the mask character where the text was filled), and a learned embedding
marks those positions. It then judges the fill against its context, instead of first having
to find which quarter of the window was written by a generator."""

from __future__ import annotations

import logging
from pathlib import Path

import torch
from torch import Tensor, nn

from src.model.char_encoder import (
    PAD,
    CharEncoder,
    CharTokenizer,
    padded,
    read_char_model,
    save_char_model,
)
from src.utils.errors import ConfigError

log = logging.getLogger(__name__)
KIND = "char_judge"


class CharJudge(nn.Module):
    """Mean of the encoder's states over the window's characters -> logit of "real text"."""

    def __init__(
        self,
        max_length: int = 64,
        hidden_size: int = 128,
        num_layers: int = 2,
        num_heads: int = 4,
        intermediate_size: int = 512,
        dropout: float = 0.1,
        sees_mask: bool = False,
    ) -> None:
        super().__init__()
        if not isinstance(sees_mask, bool):
            raise ConfigError(
                f"stages.judge.train.model.sees_mask must be true or false, got {sees_mask!r}"
            )
        encoder = {
            "max_length": max_length,
            "hidden_size": hidden_size,
            "num_layers": num_layers,
            "num_heads": num_heads,
            "intermediate_size": intermediate_size,
            "dropout": dropout,
        }
        self.settings = {**encoder, "sees_mask": sees_mask}
        self.sees_mask = sees_mask
        self.tokenizer = CharTokenizer()
        self.encoder = CharEncoder(self.tokenizer.vocab_size, **encoder)
        # 0: a character of the context, 1: a filled one (only a judge that sees the mask)
        self.filled = nn.Embedding(2, hidden_size) if self.sees_mask else None
        self.head = nn.Linear(hidden_size, 1)

    @property
    def device(self) -> torch.device:
        return self.head.weight.device

    def encode(self, texts: list[str], masked: list[str] | None = None) -> tuple[Tensor, Tensor]:
        """Windows as ids [N, W], right-padded (positions count from the first character),
        and the filled positions [N, W] (1 where `masked` differs from the text: the mask
        character is never one of the text's). A judge that sees the mask needs `masked`,
        one masked window per text; any other judge ignores it and every mark is 0."""
        width = self.encoder.max_length
        encoded = [self.tokenizer.encode(text)[:width] for text in texts]
        ids = padded(encoded, min_width=1)
        marks = torch.zeros_like(ids)
        if self.sees_mask:
            if masked is None or len(masked) != len(texts):
                raise ValueError(
                    "this judge reads which characters were filled: give each window's masked "
                    "version (with task=char_diffusion, reward.functions.judge.prompt_field="
                    "masked)"
                )
            for row, (text, mask) in enumerate(zip(texts, masked, strict=True)):
                filled = [float(a != b) for a, b in zip(text[:width], mask[:width], strict=False)]
                marks[row, : len(filled)] = torch.tensor(filled, dtype=marks.dtype)
        return ids.to(self.device), marks.to(self.device)

    def forward(self, ids: Tensor, marks: Tensor | None = None) -> Tensor:
        """Logits [N] that each window is real text (`marks`: the filled positions, read by a
        judge that sees the mask)."""
        added = None
        if self.filled is not None:
            added = self.filled(marks if marks is not None else torch.zeros_like(ids))
        hidden = self.encoder(ids, added)
        real = (ids != PAD).unsqueeze(-1).to(hidden.dtype)
        pooled = (hidden * real).sum(1) / real.sum(1).clamp(min=1)
        return self.head(pooled).squeeze(-1).float()

    @torch.no_grad()
    def score(
        self, texts: list[str], batch_size: int = 256, masked: list[str] | None = None
    ) -> list[float]:
        """Probability that each text is real, in eval mode, `batch_size` texts at a time;
        `masked` as in `encode`."""
        was_training = self.training
        self.eval()
        scores: list[float] = []
        try:
            for start in range(0, len(texts), batch_size):
                end = start + batch_size
                chunk = None if masked is None else masked[start:end]
                logits = self(*self.encode(texts[start:end], chunk))
                scores += torch.sigmoid(logits).tolist()
        finally:
            self.train(was_training)
        return scores

    def save(self, path: str | Path) -> Path:
        """Write a folder `judge_checkpoint=...` (or `reward.functions.judge.model`) loads."""
        return save_char_model(self, path, KIND, self.settings)


def load_char_judge(checkpoint: str | Path, key: str = "judge_checkpoint") -> CharJudge:
    """The judge saved in `checkpoint`, frozen in eval mode; `key` is named in errors."""
    settings, weights = read_char_model(checkpoint, KIND, key)
    judge = CharJudge(**settings)
    judge.load_state_dict(weights)
    log.info("Char judge: loaded %s", checkpoint)
    return judge.eval().requires_grad_(False)
