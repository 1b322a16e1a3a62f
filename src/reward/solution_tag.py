"""Rewards for answers given as `<think>reasoning</think> <SOLUTION>X</SOLUTION>`.

Parsing rules, shared by the rewards and by `python -m src.eval`:
- a *well-formed* tag is `<SOLUTION>` + one letter (whitespace around it allowed, any case)
  + `</SOLUTION>`; an unclosed tag, two letters or an empty tag is not well-formed;
- the *answer* is the letter of the last well-formed tag, upper-cased;
- the *format* is right when there is a non-empty reasoning block that closes before the
  first solution tag, exactly one solution tag in the text (well-formed or not), and its letter
  is an upper-case letter among the row's options.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

SOLUTION_OPEN = "<SOLUTION>"
SOLUTION_CLOSE = "</SOLUTION>"
WELL_FORMED = re.compile(r"<SOLUTION>\s*([A-Za-z])\s*</SOLUTION>")
LETTERS = "ABCD"


@dataclass(frozen=True)
class ParsedAnswer:
    """What a completion says, by the rules in the module docstring."""

    letter: str | None  # upper-cased letter of the last well-formed tag
    raw_letter: str | None  # that letter as written
    tag_count: int  # opening solution tags anywhere in the text
    reasoning: str | None  # text of the reasoning block, None when there is none before the tag


def parse_answer(
    text: str, reasoning_start: str = "<think>", reasoning_end: str = "</think>"
) -> ParsedAnswer:
    """Parse one completion; never raises, whatever the text."""
    text = text or ""
    matches = WELL_FORMED.findall(text)
    raw = matches[-1] if matches else None
    first_tag = text.find(SOLUTION_OPEN)
    reasoning = None
    start = text.find(reasoning_start)
    if start >= 0:
        end = text.find(reasoning_end, start + len(reasoning_start))
        if end >= 0 and (first_tag < 0 or end < first_tag):
            reasoning = text[start + len(reasoning_start) : end].strip()
    return ParsedAnswer(
        letter=raw.upper() if raw else None,
        raw_letter=raw,
        tag_count=text.count(SOLUTION_OPEN),
        reasoning=reasoning,
    )


def option_letters(row: dict[str, Any]) -> str:
    """The letters this row offers (canonical MCQ rows carry `options`)."""
    options = row.get("options")
    return "".join(sorted(options)) if isinstance(options, dict) and options else LETTERS


class SolutionReward:
    """Base of the solution-tag rewards: the tag names and the parse of each completion."""

    def __init__(self, reasoning_start: str = "<think>", reasoning_end: str = "</think>") -> None:
        self.reasoning_start = reasoning_start
        self.reasoning_end = reasoning_end

    def parse(self, text: str) -> ParsedAnswer:
        return parse_answer(text, self.reasoning_start, self.reasoning_end)

    def __call__(self, outcomes: list[str], rows: list[dict[str, Any]]) -> list[float]:
        return [
            float(self.score(self.parse(outcome), row))
            for outcome, row in zip(outcomes, rows, strict=True)
        ]

    def score(self, parsed: ParsedAnswer, row: dict[str, Any]) -> float:
        raise NotImplementedError


class SolutionCorrect(SolutionReward):
    """1.0 when the last well-formed solution letter equals the row's gold letter (`answer`)."""

    def __init__(self, answer_field: str = "answer", **tags: str) -> None:
        super().__init__(**tags)
        self.answer_field = answer_field

    def score(self, parsed: ParsedAnswer, row: dict[str, Any]) -> float:
        gold = str(row[self.answer_field]).strip().upper()
        return float(parsed.letter is not None and parsed.letter == gold)


class WellFormedTag(SolutionReward):
    """1.0 when the text has exactly one solution tag, well-formed, with an offered letter."""

    def score(self, parsed: ParsedAnswer, row: dict[str, Any]) -> float:
        return float(
            parsed.tag_count == 1
            and parsed.raw_letter is not None
            and parsed.raw_letter in option_letters(row)
        )


class SolutionFormat(SolutionReward):
    """Partial credit, a third each: a reasoning block before the answer, exactly one solution
    tag, and an upper-case letter among the options in it."""

    def score(self, parsed: ParsedAnswer, row: dict[str, Any]) -> float:
        checks = (
            bool(parsed.reasoning),
            parsed.tag_count == 1,
            parsed.raw_letter is not None and parsed.raw_letter in option_letters(row),
        )
        return sum(checks) / len(checks)


def extract_letter(text: str) -> str | None:
    """The answer letter of a completion (last well-formed tag), for evaluation records."""
    return parse_answer(text).letter
