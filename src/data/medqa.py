"""MedQA-USMLE rows (`GBaker/MedQA-USMLE-4-options`) into canonical multiple-choice rows.

The release has `question, options {A..D}, answer_idx (the letter), answer (its text)` and
sometimes `meta_info`; it carries no explanation.
"""

from __future__ import annotations

from typing import Any

from src.data.mcq import LETTERS, BadRow, DropRow, blank, mcq_row, text


class MedQA:
    """Schema of MedQA rows; the gold letter must name an option and agree with `answer`."""

    def __call__(self, row: dict[str, Any]) -> dict[str, Any]:
        options = row.get("options")
        if blank(options):
            raise DropRow("missing option")
        if not isinstance(options, dict):
            raise BadRow(
                f"options must be an object of letter -> text, got {type(options).__name__}"
            )
        extra = sorted(set(options) - set(LETTERS))
        if extra:
            raise BadRow(f"options has keys {extra}; expected {list(LETTERS)}")
        letter = text(row.get("answer_idx")).upper()
        if not letter:
            raise DropRow("missing label")
        if letter not in LETTERS:
            raise BadRow(f"answer_idx={row.get('answer_idx')!r} is not one of {list(LETTERS)}")
        clean = mcq_row(
            row.get("question"),
            [options.get(key) for key in LETTERS],
            LETTERS.index(letter),
            row.get("explanation"),
            subject=row.get("meta_info"),
            id=row.get("id"),
        )
        answer = text(row.get("answer"))
        if answer and answer != clean["answer_text"]:
            raise BadRow(
                f"answer {answer!r} contradicts answer_idx={letter} ({clean['answer_text']!r})"
            )
        return clean
