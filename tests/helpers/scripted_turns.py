"""A turn sampler whose every turn is scripted text, for tests of rollouts in turns.

`ScriptedTurns(script)` continues each context (prompt and turns so far, as text) with
`script(context, row)`; as a run's `rollout._target_` it searches once with a query of its own
per row (`query`, e.g. `+rollout.query='triage note row {row}'`), then answers a letter its
context picks (so the rows of a group differ).
"""

from __future__ import annotations

import zlib
from collections.abc import Callable
from functools import partial
from typing import Any

import torch
from torch import Tensor

from src.rollout.decode import Drawn


def search_then_answer(context: str, row: int, query: str = "findings of row {row}") -> str:
    """Before any passage: `query` for the row, then the closing tag (the prompt ends with
    `<search>`); after one: an option's whole line ("B. text", the last such line of the
    context, so the question's own), picked by the context, then EOS ('$'). Its letter answers
    under `policy.answer_as=letter`, its text under `option`."""
    if "<information>" not in context.rsplit("<search>", 1)[-1]:
        return f" {query.format(row=row)}</search>"
    letter = "ABCD"[zlib.crc32(context.encode()) % 4]
    start = context.rfind(f"\n{letter}. ")
    line = context[start + 1 :].split("\n", 1)[0] if start >= 0 else letter
    return f"<answer>{line}</answer>$"


class ScriptedTurns:
    """Continues each context with the text `script(context, row)` gives, then EOS where the
    text ends with '$' ('$' itself is not written); records every call."""

    temperature = 1.0

    def __init__(
        self,
        script: Callable[[str, int], str] | None = None,
        max_completion_length: int = 200,
        query: str = "findings of row {row}",
        stop_strings: list[str] | None = None,
        **_: Any,
    ) -> None:
        self.script = script or partial(search_then_answer, query=query)
        self.max_completion_length = max_completion_length
        self.stop_strings = list(stop_strings or [])
        self.calls: list[tuple[list[str], int, int]] = []

    def sync(self, lm: Any) -> None:
        """The script reads no weights."""

    def sample(self, lm: Any, prompts: list[str], group_size: int, greedy: bool = False) -> Any:
        raise NotImplementedError("ScriptedTurns draws turns only (a searching role's rollout)")

    def new_tokens(
        self,
        lm: Any,
        input_ids: Tensor,
        attention_mask: Tensor,
        group_size: int,
        max_new_tokens: int,
        greedy: bool = False,
        stop: Any = None,
    ) -> Drawn:
        """The scripted continuation of each context, G rows each, right-padded (whole: a
        script's turn is its own end, so `stop` has nothing to cut); a script reports no
        log-probs."""
        tokenizer = lm.tokenizer
        contexts = [
            tokenizer.decode(ids[mask.bool()].tolist(), skip_special_tokens=True)
            for ids, mask in zip(input_ids, attention_mask, strict=True)
        ]
        self.calls.append((contexts, group_size, max_new_tokens))
        rows = []
        for context in contexts:
            for g in range(group_size):
                text = self.script(context, g)
                ids = tokenizer(text.rstrip("$"), add_special_tokens=False)["input_ids"]
                rows.append(ids + lm.eos_token_ids[:1] if text.endswith("$") else ids)
        rows = [row[:max_new_tokens] for row in rows]
        return Drawn(right_padded(rows, tokenizer.pad_token_id), None)

    def new_tokens_after(
        self, lm: Any, contexts: Any, max_new_tokens: int, greedy: bool = False, stop: Any = None
    ) -> Drawn:
        """A later turn: each row's whole context continued as `new_tokens` continues one."""
        ids, mask = contexts.full(lm.tokenizer.pad_token_id)
        return self.new_tokens(lm, ids, mask, 1, max_new_tokens, greedy, stop)


def right_padded(rows: list[list[int]], pad: int) -> Tensor:
    """Token rows as one right-padded tensor."""
    width = max(len(row) for row in rows)
    return torch.tensor([row + [pad] * (width - len(row)) for row in rows])
