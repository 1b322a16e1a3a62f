"""Accuracy: the final answer in the text equals the gold answer."""

from __future__ import annotations

import re
from typing import Any

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
    """1.0 when the outcome's final number equals the row's `answer` field, else 0.0.

    Numeric answers compare as numbers; others fall back to a case-insensitive string match of
    the stripped outcome.
    """

    def __init__(self, answer_field: str = "answer") -> None:
        self.answer_field = answer_field

    def __call__(self, outcomes: list[str], rows: list[dict[str, Any]]) -> list[float]:
        scores = []
        for outcome, row in zip(outcomes, rows, strict=True):
            gold = str(row[self.answer_field]).strip()
            if NUMBER.fullmatch(gold):
                scores.append(float(extract_final_number(outcome) == extract_final_number(gold)))
            else:
                scores.append(float(outcome.strip().lower() == gold.lower()))
        return scores
