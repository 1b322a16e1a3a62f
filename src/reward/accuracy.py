"""Accuracy: the final answer a completion states equals the gold answer.

Gold answers are GSM8K-style final values ("1,000", "$5", "3/4", "18 dollars", "12%") or
free text ("f(x)=0"); completions are free text with reasoning, so both sides are normalised
(src/data/answers.py) before they are compared.
"""

from __future__ import annotations

import math
import re
from typing import Any

from src.data.answers import canonical_text, extract_final_answer, normalize_number

NUMBER = re.compile(r"-?\d[\d,]*(?:\.\d+)?")


def extract_final_number(text: str) -> str | None:
    """The last number in the text, without thousands separators or a trailing '.0'."""
    found = NUMBER.findall(text)
    if not found:
        return None
    value = found[-1].replace(",", "")
    if "." in value:
        value = value.rstrip("0").rstrip(".")
    return value


class AnswerAccuracy:
    """1.0 when the completion's final answer equals the row's `answer` field, else 0.0.

    The completion's answer is `extract_final_answer`'s. A numeric gold (`normalize_number`
    gives a value) matches an answer that normalises to the same number within a relative
    tolerance of 1e-6. Any other gold is compared as text, case-insensitively after collapsing
    whitespace and dropping `$`, a trailing period and a surrounding `\\boxed{}`, with the
    extracted answer or with the whole stripped completion. `required_fields` names the row
    fields a row must have non-empty to be scored: the answer field.
    """

    def __init__(self, answer_field: str = "answer") -> None:
        self.answer_field = answer_field

    @property
    def required_fields(self) -> tuple[str, ...]:
        """The row fields this reward reads; a row needs them non-empty to be scored."""
        return (self.answer_field,)

    def __call__(self, outcomes: list[str], rows: list[dict[str, Any]]) -> list[float]:
        """One score per outcome, against the gold answer of the row at the same position."""
        return [
            self.score(outcome, str(row[self.answer_field]))
            for outcome, row in zip(outcomes, rows, strict=True)
        ]

    @staticmethod
    def score(outcome: str, gold: str) -> float:
        """1.0 when the outcome's final answer equals `gold`, else 0.0."""
        answer = extract_final_answer(outcome)
        expected = normalize_number(gold)
        if expected is not None:
            value = None if answer is None else normalize_number(answer)
            right = value is not None and math.isclose(value, expected, rel_tol=1e-6, abs_tol=1e-9)
            return float(right)
        target = canonical_text(gold)
        candidates = [outcome.strip()] if answer is None else [answer, outcome.strip()]
        return float(any(canonical_text(candidate) == target for candidate in candidates))
