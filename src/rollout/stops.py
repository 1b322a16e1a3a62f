"""Where decoded text ends at a mark: a multi-turn row at `</search>`, a completion at one of
its sampler's `stop_strings` (a base model continuing past its answer). `stop_at_marks` ends
rows during decoding; `first_mark` finds how many tokens the text needs to hold the mark, so a
row is cut there, the mark's token kept."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import torch
from torch import Tensor

from src.rollout.decode import Stop

ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "\\": "\\"}  # after a backslash -> meant
ESCAPED = re.compile(r"\\([ntr\\])")


def stop_texts(texts: Sequence[str] | None) -> list[str]:
    """The stop texts of `rollout.stop_strings`, with a line end, tab or carriage return typed
    as two characters (a backslash, then n, t or r: what the command line passes for
    `'rollout.stop_strings=["\\n"]'`) read as the character it names, and a doubled backslash
    as one, in one pass from the left, as a YAML file's double-quoted text is read (`\\\\t` is
    a backslash and a t, not a backslash and a tab)."""
    return [ESCAPED.sub(lambda found: ESCAPES[found.group(1)], text) for text in texts or []]


def first_mark(tokenizer: Any, tokens: list[int], marks: list[str]) -> tuple[int, str | None]:
    """The fewest leading `tokens` whose text holds one of `marks`, and which mark;
    (len(tokens), None) where the text holds none."""
    text = tokenizer.decode(tokens, skip_special_tokens=True)
    if not any(mark in text for mark in marks):
        return len(tokens), None
    for count in range(1, len(tokens) + 1):
        text = tokenizer.decode(tokens[:count], skip_special_tokens=True)
        found = [mark for mark in marks if mark in text]
        if found:
            return count, min(found, key=text.index)
    return len(tokens), None  # unreachable: the whole text holds a mark


def stop_at_marks(tokenizer: Any, marks: list[list[str]]) -> Stop:
    """A `Stop` that ends row i once the text of its drawn tokens holds one of `marks[i]` (the
    text `first_mark` cuts it at), so a turn's decoding ends when every row has paused or
    answered, not at the longest row's budget."""

    def stopped(drawn: Tensor, going: Tensor) -> Tensor:
        ends = torch.zeros(drawn.size(0), dtype=torch.bool)
        for i in going.nonzero().flatten().tolist():
            text = tokenizer.decode(drawn[i].tolist(), skip_special_tokens=True)
            ends[i] = any(mark in text for mark in marks[i])
        return ends.to(drawn.device)

    return stopped
