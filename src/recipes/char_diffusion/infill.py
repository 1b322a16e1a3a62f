"""The infill role: the trained network fills the masked spans of a character window; the
outcome the reward scores is the whole window with the fill-in in place."""

from __future__ import annotations

import re
from typing import Any

from src.model.network import PolicyNetwork
from src.policy.role import Outcomes

# Runs the windows' text never holds (whitespace is collapsed to single spaces, and a letter
# three times in a row is all but absent from prose): what a generator writes where it does
# not know what belongs, and what GRPO against a judge learns to write when the judge lets it.
DEGENERATE_RUN = re.compile(r"(.)\1{2,}| {2,}")


def restored(fill: str, original: str) -> int:
    """How many characters of `fill` equal `original`'s at the same place."""
    return sum(a == b for a, b in zip(fill, original, strict=False))


def degenerate_share(masked: str, filled: str, mask_char: str) -> float:
    """Share of the masked spans (runs of `mask_char` in `masked`) that the fill-in leaves
    touching a degenerate run of `filled`: three or more of one character, or two or more
    spaces (the run may reach past the span into the text around it). 0 without spans."""
    spans = [range(m.start(), m.end()) for m in re.finditer(re.escape(mask_char) + "+", masked)]
    if not spans:
        return 0.0
    runs = [range(m.start(), m.end()) for m in DEGENERATE_RUN.finditer(filled)]
    hit = sum(
        any(span.start < run.stop and run.start < span.stop for run in runs) for span in spans
    )
    return hit / len(spans)


class Infill:
    """Prompts are the masked windows (`masked` field, the mask character at each masked
    position); a completion is one character per masked position, left to right.

    Each outcome's details carry the filled window (`filled`, for the samples tables),
    `char_accuracy`, the share of fill characters equal to the original text, and
    `degenerate_spans`, the share of masked spans filled into a run the text never holds
    (`degenerate_share`), logged as `role/<name>` and `eval/role/<name>`: whether a judge is
    satisfied by restoring the text or by something else, the second without the original.
    """

    def __init__(self, mask_char: str = "\u2588") -> None:
        self.mask_char = mask_char

    def prepare(self, network: PolicyNetwork, rows: list[dict[str, Any]]) -> dict[str, float]:
        """Nothing to prepare: the masked window is the prompt."""
        return {}

    def prompts(self, rows: list[dict[str, Any]], tokenizer: Any = None) -> list[str]:
        return [row["masked"] for row in rows]

    def outcomes(
        self,
        completions: list[str],
        rows: list[dict[str, Any]],
        network: PolicyNetwork | None = None,
    ) -> Outcomes:
        """The filled windows, and how many fill characters restore the original."""
        texts, details = [], []
        for fill, row in zip(completions, rows, strict=True):
            filled = self.filled(row["masked"], fill)
            original = row["answer"]
            texts.append(filled)
            details.append(
                {
                    "filled": filled,
                    "char_accuracy": restored(fill, original) / max(len(original), 1),
                    "degenerate_spans": degenerate_share(row["masked"], filled, self.mask_char),
                }
            )
        return Outcomes(texts, details)

    def filled(self, masked: str, fill: str) -> str:
        """`masked` with its mask characters replaced by those of `fill`, in order (a fill
        that is too short leaves the rest masked)."""
        chars = iter(fill)
        return "".join(next(chars, char) if char == self.mask_char else char for char in masked)

    def reads_completions(self) -> bool:
        """The completions are the fills that are scored."""
        return True

    def sft_targets(self, rows: list[dict[str, Any]]) -> list[str]:
        """The original characters of the masked positions: masked-LM training."""
        return [row["answer"] for row in rows]
