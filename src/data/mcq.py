"""Multiple-choice questions in one shape, whatever release they come from, and their cleaning.

Every MCQ schema (MedMCQA, MedQA) turns its raw rows into the same canonical row, so one
policy template, one reward and one evaluation serve all of them:
`question`, `A`..`D` (option texts), `options` (letter -> text), `options_text` ("A. ..." lines),
`answer` (gold letter), `answer_text`, `explanation`, `subject`, `topic`, `choice_type`, `id`.
"""

from __future__ import annotations

import logging
import random
from collections import Counter
from collections.abc import Callable, Iterable
from typing import Any

from src.data.files import DataFileError

log = logging.getLogger(__name__)
LETTERS = "ABCD"


class DropRow(ValueError):
    """A row that cleaning leaves out (incomplete); its message is the reason that is counted."""


class BadRow(ValueError):
    """A row that is wrong rather than incomplete (label 7 of four options): an error, not a drop."""


def blank(value: Any) -> bool:
    """True for a value that carries no text: None, NaN, or only whitespace."""
    if value is None:
        return True
    if isinstance(value, float) and value != value:
        return True
    return isinstance(value, str) and not value.strip()


def text(value: Any) -> str:
    """A field as stripped text ('' for None)."""
    return "" if blank(value) else str(value).strip()


def mcq_row(
    question: Any,
    options: list[Any],
    answer_index: int,
    explanation: Any = None,
    **meta: Any,
) -> dict[str, Any]:
    """The canonical row; drops the row when the question or an option is missing."""
    if blank(question):
        raise DropRow("missing question")
    if len(options) != len(LETTERS):
        raise BadRow(f"expected {len(LETTERS)} options, got {len(options)}")
    if any(blank(option) for option in options):
        raise DropRow("missing option")
    letters = LETTERS[: len(options)]
    by_letter = {letter: text(option) for letter, option in zip(letters, options, strict=True)}
    return {
        "question": text(question),
        **option_fields(by_letter, letters[answer_index]),
        "explanation": text(explanation),
        **{key: text(value) for key, value in meta.items()},
    }


def option_fields(by_letter: dict[str, str], answer: str) -> dict[str, Any]:
    """The fields of a canonical row that name options by letter: one per letter, `options`,
    `options_text` ("A. ..." lines), `answer` (the gold letter) and `answer_text`."""
    return {
        **by_letter,
        "options": by_letter,
        "options_text": "\n".join(f"{letter}. {option}" for letter, option in by_letter.items()),
        "answer": answer,
        "answer_text": by_letter[answer],
    }


def is_mcq_row(row: dict[str, Any]) -> bool:
    """True for a canonical row: `options` maps letters to texts and `answer` is one of them."""
    options = row.get("options")
    return isinstance(options, dict) and row.get("answer") in options


def shuffle_options(row: dict[str, Any], rng: random.Random) -> dict[str, Any]:
    """A copy of a canonical row with its option texts dealt to the letters in a random order.

    The letters stay A, B, C, ... in the prompt; the texts move, and `answer` (the gold letter),
    `answer_text` and every letter field follow them. So a policy that learns a letter or a
    position earns the chance rate on every question, whatever the file's gold letters favour.
    """
    letters = list(row["options"])
    dealt = list(letters)  # dealt[i]: the letter whose text goes to letters[i]
    rng.shuffle(dealt)
    by_letter = {letter: row["options"][old] for letter, old in zip(letters, dealt, strict=True)}
    return {**row, **option_fields(by_letter, letters[dealt.index(row["answer"])])}


def where(row: dict[str, Any], index: int, source: str) -> str:
    """'file:line' for rows read from JSONL, else 'source: row N' (0-based)."""
    source = row.get("_file", source)
    return f"{source}:{row['_line']}" if "_line" in row else f"{source}: row {index}"


def clean_rows(
    rows: Iterable[dict[str, Any]], schema: Callable[[dict[str, Any]], dict[str, Any]], source: str
) -> tuple[list[dict[str, Any]], dict[str, int]]:
    """Apply `schema` to every row: kept rows, and how many were dropped for each reason.

    A `BadRow` stops with a `DataFileError` naming the source and line, because a wrong label
    means the file was misread (e.g. 1-based labels read as 0-based), not that a row is missing.
    """
    kept, dropped = [], Counter()
    for index, row in enumerate(rows):
        try:
            clean = schema(row)
        except DropRow as reason:
            dropped[str(reason)] += 1
            continue
        except BadRow as error:
            raise DataFileError(f"{where(row, index, source)}: {error}") from None
        if "_line" in row:
            clean["_line"] = row["_line"]
        kept.append(clean)
    if dropped:
        log.warning("%s: dropped %d rows: %s", source, sum(dropped.values()), dict(dropped))
    return kept, dict(dropped)
