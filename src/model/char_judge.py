"""The judge of filled windows: a bidirectional character encoder with one logit, trained to
tell real text from corrupted text, and frozen as the reward of `task=char_diffusion`."""

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
    ) -> None:
        super().__init__()
        self.settings = {
            "max_length": max_length,
            "hidden_size": hidden_size,
            "num_layers": num_layers,
            "num_heads": num_heads,
            "intermediate_size": intermediate_size,
            "dropout": dropout,
        }
        self.tokenizer = CharTokenizer()
        self.encoder = CharEncoder(self.tokenizer.vocab_size, **self.settings)
        self.head = nn.Linear(hidden_size, 1)

    @property
    def device(self) -> torch.device:
        return self.head.weight.device

    def encode(self, texts: list[str]) -> Tensor:
        """Windows as ids [N, W], right-padded (positions count from the first character)."""
        encoded = [self.tokenizer.encode(text)[: self.encoder.max_length] for text in texts]
        return padded(encoded, min_width=1).to(self.device)

    def forward(self, ids: Tensor) -> Tensor:
        """Logits [N] that each window is real text."""
        hidden = self.encoder(ids)
        real = (ids != PAD).unsqueeze(-1).to(hidden.dtype)
        pooled = (hidden * real).sum(1) / real.sum(1).clamp(min=1)
        return self.head(pooled).squeeze(-1).float()

    @torch.no_grad()
    def score(self, texts: list[str], batch_size: int = 256) -> list[float]:
        """Probability that each text is real, in eval mode, `batch_size` texts at a time."""
        was_training = self.training
        self.eval()
        scores: list[float] = []
        try:
            for start in range(0, len(texts), batch_size):
                logits = self(self.encode(texts[start : start + batch_size]))
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
