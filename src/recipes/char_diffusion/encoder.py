"""What the character models share: the alphabet, the bidirectional encoder, and their folders.

The masked character generator (`network.py`) and its judge (`judge_network.py`) read the
same characters through the same kind of encoder. A saved folder holds `char_model.json` (its
kind and settings) and `weights.pt`, so loading a judge where a generator is expected fails
with a message rather than with mismatched tensors.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from src.model.saved import KIND_FILE
from src.utils.errors import ConfigError, MissingFileError

PAD, MASK, UNK = 0, 1, 2  # ids below FIRST_CHAR are never a character of the text
FIRST_CHAR = 3
ALPHABET = "".join(
    chr(code) for code in range(32, 127)
)  # printable ASCII (whitespace is collapsed to spaces)
LOCAL_WIDTH = 5  # characters a position sees before attention: itself and two on each side
DESCRIPTION = KIND_FILE
WEIGHTS = "weights.pt"


class CharTokenizer:
    """Characters to ids and back: one id per character of `ALPHABET`, `mask_char` is the
    mask id, anything else is unknown. A window is read whole; nothing is split or merged."""

    chat_template = None  # roles that look for a chat template find none

    def __init__(self, mask_char: str = "\u2588") -> None:
        self.mask_char = mask_char
        self.ids = {char: FIRST_CHAR + i for i, char in enumerate(ALPHABET)}
        self.ids[mask_char] = MASK
        self.vocab_size = FIRST_CHAR + len(ALPHABET)

    def encode(self, text: str) -> list[int]:
        """One id per character."""
        return [self.ids.get(char, UNK) for char in text]

    def decode(self, ids: list[int] | Tensor) -> str:
        """The characters of `ids`; padding is dropped, the mask and unknown ids show as the
        mask character and `?`."""
        chars = []
        for i in ids.tolist() if isinstance(ids, Tensor) else ids:
            if i >= FIRST_CHAR:
                chars.append(ALPHABET[i - FIRST_CHAR])
            elif i == MASK:
                chars.append(self.mask_char)
            elif i == UNK:
                chars.append("?")
        return "".join(chars)


def check_heads(section: str, hidden_size: int, num_heads: int) -> None:
    """The heads must split the width evenly: `ConfigError` naming `section`'s two keys."""
    if hidden_size % num_heads:
        raise ConfigError(
            f"{section}.num_heads must divide {section}.hidden_size ({hidden_size}) evenly, got "
            f"{num_heads}"
        )


class CharEncoder(nn.Module):
    """A pre-norm transformer encoder over characters: every position sees the whole window
    (no causal mask), which is what filling a masked span from both sides needs."""

    def __init__(
        self,
        vocab_size: int,
        max_length: int,
        hidden_size: int,
        num_layers: int,
        num_heads: int,
        intermediate_size: int,
        dropout: float,
    ) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab_size, hidden_size, padding_idx=PAD)
        self.position = nn.Embedding(max_length, hidden_size)
        # each character first mixes with its neighbours: attention then starts from local
        # context instead of having to discover position offsets first (a long plateau)
        self.local = nn.Conv1d(hidden_size, hidden_size, LOCAL_WIDTH, padding=LOCAL_WIDTH // 2)
        self.blocks = nn.ModuleList(
            EncoderBlock(hidden_size, num_heads, intermediate_size, dropout)
            for _ in range(num_layers)
        )
        self.norm = nn.LayerNorm(hidden_size)
        self.max_length = max_length

    def forward(self, ids: Tensor, added: Tensor | None = None) -> Tensor:
        """Hidden states [N, W, H] of windows `ids` [N, W]; padding (left or right) is not
        attended to, and positions count from each row's first real character. `added`
        [N, W, H] joins the character embeddings (a judge's marks of filled positions)."""
        if ids.size(1) > self.max_length:
            raise ValueError(
                f"windows of {ids.size(1)} characters exceed the model's {self.max_length}; "
                "set data.window no larger than the model was built for"
            )
        real = ids != PAD
        positions = (real.long().cumsum(dim=1) - 1).clamp(min=0)
        hidden = self.embed(ids)
        if added is not None:
            hidden = hidden + added
        hidden = hidden + self.local(hidden.transpose(1, 2)).transpose(1, 2)
        hidden = hidden + self.position(positions)
        attend = None if bool(real.all()) else real[:, None, None, :]
        for block in self.blocks:
            hidden = block(hidden, attend)
        return self.norm(hidden)


class EncoderBlock(nn.Module):
    """Self-attention over the whole window, then an MLP, each behind a layer norm and added
    back; attention goes through `scaled_dot_product_attention` (fused kernels on any device)."""

    def __init__(self, hidden_size: int, num_heads: int, intermediate_size: int, dropout: float):
        super().__init__()
        self.num_heads = num_heads
        self.dropout = dropout
        self.attention_norm = nn.LayerNorm(hidden_size)
        self.qkv = nn.Linear(hidden_size, 3 * hidden_size)
        self.out = nn.Linear(hidden_size, hidden_size)
        self.mlp_norm = nn.LayerNorm(hidden_size)
        self.up = nn.Linear(hidden_size, intermediate_size)
        self.down = nn.Linear(intermediate_size, hidden_size)

    def forward(self, hidden: Tensor, attend: Tensor | None) -> Tensor:
        """`attend` [N, 1, 1, W] is True on the positions that may be attended to (None: all)."""
        n, w, h = hidden.shape
        dropout = self.dropout if self.training else 0.0
        qkv = self.qkv(self.attention_norm(hidden)).view(
            n, w, 3, self.num_heads, h // self.num_heads
        )
        q, k, v = qkv.permute(2, 0, 3, 1, 4)
        mixed = F.scaled_dot_product_attention(q, k, v, attn_mask=attend, dropout_p=dropout)
        hidden = hidden + F.dropout(
            self.out(mixed.transpose(1, 2).reshape(n, w, h)), dropout, self.training
        )
        update = self.down(F.gelu(self.up(self.mlp_norm(hidden))))
        return hidden + F.dropout(update, dropout, self.training)


def padded(rows: list[list[int]], left: bool = False, min_width: int = 0) -> Tensor:
    """Id lists as one tensor [N, W] filled with the pad id, right-aligned when `left` (left
    padding), W the longest row or `min_width`."""
    width = max([len(row) for row in rows] + [min_width])
    ids = torch.full((len(rows), width), PAD, dtype=torch.long)
    for number, row in enumerate(rows):
        if row:
            start = width - len(row) if left else 0
            ids[number, start : start + len(row)] = torch.tensor(row, dtype=torch.long)
    return ids


def save_char_model(module: nn.Module, folder: str | Path, kind: str, settings: dict) -> Path:
    """Write `module`'s weights and what rebuilds it (its kind and settings) into `folder`."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / DESCRIPTION).write_text(json.dumps({"kind": kind, "settings": settings}, indent=2))
    torch.save(module.state_dict(), folder / WEIGHTS)
    return folder


def read_char_model(folder: str | Path, kind: str, key: str) -> tuple[dict[str, Any], dict]:
    """The settings and weights saved in `folder`, which must hold a char model of `kind`;
    `key` (the config key that named the folder) is what the error messages name."""
    folder = Path(folder)
    description = folder / DESCRIPTION
    if not description.is_file():
        raise MissingFileError(
            f"{key}={folder}: no {DESCRIPTION} there; give a folder written by the "
            f"char_diffusion stages (outputs/cache/...) or by a trained run's save_model"
        )
    saved = json.loads(description.read_text())
    if saved.get("kind") != kind:
        raise ConfigError(
            f"{key}={folder} holds a {saved.get('kind')!r} model, not a {kind!r}; point {key} "
            f"to a {kind} folder"
        )
    weights = torch.load(folder / WEIGHTS, map_location="cpu", weights_only=True)
    return saved["settings"], weights
