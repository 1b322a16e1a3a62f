"""The judge of filled windows: a bidirectional character encoder with one logit, trained to
tell real text from corrupted text, and frozen as the reward of `task=char_diffusion`.

A judge built with `sees_mask` also reads which positions were filled: each window comes with
its masked version (the mask character where the text was filled), and a learned embedding
marks those positions. It then judges the fill against its context, instead of first having
to find which quarter of the window was written by a generator.

A judge with a character head (`char_head`) also gives every character a logit that it is the
text's own (replaced-character detection, as ELECTRA's discriminator). With
`score="characters"` its score of a window is the mean of those probabilities over the filled
characters: an estimate of the share of the fill that restores the text, meant to rank a
window's fills by the characters they get right rather than by how real the whole window looks
(docs/recipes/char_diffusion.md measures how far it does)."""

from __future__ import annotations

import logging
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import torch
from torch import Tensor, nn

from src.recipes.char_diffusion.encoder import (
    PAD,
    CharEncoder,
    CharTokenizer,
    check_heads,
    padded,
    read_char_model,
    save_char_model,
)
from src.recipes.char_diffusion.settings import SETTINGS
from src.utils.errors import ConfigError
from src.utils.setting import Declared

log = logging.getLogger(__name__)
KIND = "char_judge"


@dataclass(frozen=True)
class JudgeShape(Declared):
    """The judge's encoder: its sizes and dropout, each field the
    `stages.judge.train.model.<field>` key of its name."""

    SECTION = "stages.judge.train.model"
    TABLE = SETTINGS

    max_length: int = 64
    hidden_size: int = 128
    num_layers: int = 2
    num_heads: int = 4
    intermediate_size: int = 512
    dropout: float = 0.1

    def __post_init__(self) -> None:
        super().__post_init__()
        check_heads(self.SECTION, self.hidden_size, self.num_heads)


class CharJudge(nn.Module):
    """Mean of the encoder's states over the window's characters -> logit of "real text";
    with `char_head`, each character's state -> logit of "the text's own character"."""

    def __init__(
        self, sees_mask: bool = False, char_head: bool = False, score: str = "window", **shape: Any
    ) -> None:
        """`shape`: the encoder's sizes and dropout (`JudgeShape`, checked there)."""
        super().__init__()
        encoder = asdict(JudgeShape.of(shape, "the judge"))
        if score == "characters" and not (char_head and sees_mask):
            raise ConfigError(
                "stages.judge.train.model.score=characters scores the filled characters: it "
                "needs stages.judge.train.model.sees_mask=true and stages.judge.train.char_loss "
                "above 0 (which trains the character head)"
            )
        hidden_size = encoder["hidden_size"]
        self.settings = {**encoder, "sees_mask": sees_mask, "char_head": char_head, "score": score}
        self.sees_mask = sees_mask
        self.scored_by = score
        self.tokenizer = CharTokenizer()
        self.encoder = CharEncoder(self.tokenizer.vocab_size, **encoder)
        # 0: a character of the context, 1: a filled one (only a judge that sees the mask)
        self.filled = nn.Embedding(2, hidden_size) if self.sees_mask else None
        self.head = nn.Linear(hidden_size, 1)
        # each character's logit that it is the text's own (only a judge with a char head)
        self.char_head = nn.Linear(hidden_size, 1) if char_head else None

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
        return self.outputs(ids, marks)[0]

    def outputs(self, ids: Tensor, marks: Tensor | None = None) -> tuple[Tensor, Tensor | None]:
        """Logits [N] that each window is real text, and [N, W] that each character is the
        text's own (None without a char head), from one pass of the encoder."""
        added = None
        if self.filled is not None:
            added = self.filled(marks if marks is not None else torch.zeros_like(ids))
        hidden = self.encoder(ids, added)
        real = (ids != PAD).unsqueeze(-1).to(hidden.dtype)
        pooled = (hidden * real).sum(1) / real.sum(1).clamp(min=1)
        window = self.head(pooled).squeeze(-1).float()
        if self.char_head is None:
            return window, None
        return window, self.char_head(hidden).squeeze(-1).float()

    def scores(self, ids: Tensor, marks: Tensor) -> Tensor:
        """Scores [N] in [0, 1] of windows `ids` with filled positions `marks` (`scored`)."""
        return self.scored(ids, marks, *self.outputs(ids, marks))

    def scored(self, ids: Tensor, marks: Tensor, window: Tensor, chars: Tensor | None) -> Tensor:
        """Scores [N] in [0, 1] from `outputs`' logits: the probability that the window is
        real, or with `score="characters"` the mean probability over the filled characters
        (over every character where none was filled) that each is the text's own."""
        if self.scored_by == "window" or chars is None:
            return torch.sigmoid(window)
        real = ids != PAD
        counted = (marks > 0) & real
        counted = torch.where(counted.any(1, keepdim=True), counted, real).float()
        return (torch.sigmoid(chars) * counted).sum(1) / counted.sum(1).clamp(min=1)

    @torch.no_grad()
    def score(
        self, texts: list[str], batch_size: int = 256, masked: list[str] | None = None
    ) -> list[float]:
        """Each text's score (`scores`), in eval mode, `batch_size` texts at a time; `masked`
        as in `encode`."""
        was_training = self.training
        self.eval()
        scores: list[float] = []
        try:
            for start in range(0, len(texts), batch_size):
                end = start + batch_size
                chunk = None if masked is None else masked[start:end]
                scores += self.scores(*self.encode(texts[start:end], chunk)).tolist()
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
