"""How a prompt starts: with the tokenizer's BOS exactly once where the tokenizer adds one.

Gemma is trained with `<bos>` first; prompts are encoded without the tokenizer's special
tokens (a chat template may have written the BOS into the text already), so the BOS is put
back here where the tokenizer would add it, never twice. A tokenizer that adds none (the tiny
model's, SmolLM2's) leaves its prompts as they are.
"""

from __future__ import annotations

import itertools
from typing import Any


def added_bos(tokenizer: Any) -> int | None:
    """The id the tokenizer puts first when it adds its special tokens (Gemma's `<bos>`), or
    None for a tokenizer that adds none (the tiny model's, SmolLM2's): what every prompt must
    start with, exactly once."""
    bos = tokenizer.bos_token_id
    if bos is None:
        return None
    ids = tokenizer("a", add_special_tokens=True)["input_ids"]
    return bos if ids and ids[0] == bos else None


def prompt_token_ids(
    tokenizer: Any, prompts: list[str], limit: int | None = None, bos: int | None = None
) -> list[list[int]]:
    """Each prompt's token ids: with the BOS `bos` (`added_bos`) first exactly once where
    given (a chat template may have written it already; a run of them is cut to one),
    truncated from the left beyond `limit` tokens with the BOS kept first."""
    rows = tokenizer(prompts, add_special_tokens=False)["input_ids"]
    if bos is not None:
        rows = [[bos, *itertools.dropwhile(lambda i: i == bos, row)] for row in rows]
    if limit is not None:
        head = 1 if bos is not None and limit > 1 else 0
        rows = [
            row if len(row) <= limit else row[:head] + row[len(row) - limit + head :]
            for row in rows
        ]
    return rows
