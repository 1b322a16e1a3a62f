"""MedMCQA rows (`openlifescienceai/medmcqa`) into canonical multiple-choice rows.

The hub release has `question, opa, opb, opc, opd, cop, exp, subject_name, topic_name,
choice_type, id`, with the correct option `cop` 0-based and -1 where the label is withheld
(its test split).
"""

from __future__ import annotations

from typing import Any

from src.data.mcq import LETTERS, BadRow, DropRow, blank, mcq_row

OPTION_FIELDS = ("opa", "opb", "opc", "opd")


class MedMCQA:
    """Schema of MedMCQA rows; `label_base` 0 for the hub release, 1 for files labelled 1-4."""

    def __init__(self, label_base: int = 0) -> None:
        self.label_base = label_base

    def __call__(self, row: dict[str, Any]) -> dict[str, Any]:
        answer_index = label_index(row.get("cop"), self.label_base, "cop")
        return mcq_row(
            row.get("question"),
            [row.get(name) for name in OPTION_FIELDS],
            answer_index,
            row.get("exp"),
            subject=row.get("subject_name"),
            topic=row.get("topic_name"),
            choice_type=row.get("choice_type"),
            id=row.get("id"),
        )


def label_index(value: Any, label_base: int, field: str) -> int:
    """A 0-based option index from an integer label; a withheld label (None, -1) drops the row."""
    if blank(value) or value == -1:
        raise DropRow("missing label")
    try:
        number = int(value)
        if number != float(value):
            raise ValueError
    except (TypeError, ValueError):
        raise BadRow(f"{field}={value!r} is not an integer option label") from None
    index = number - label_base
    if not 0 <= index < len(LETTERS):
        low, high = label_base, label_base + len(LETTERS) - 1
        raise BadRow(
            f"{field}={number} is out of range: with data.schema.label_base={label_base} labels "
            f"run {low}-{high}"
        )
    return index
