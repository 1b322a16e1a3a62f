"""A frozen planner's plans, kept on disk so they are generated once per model, prompt template
and question, however many runs and sweep jobs use them."""

from __future__ import annotations

import hashlib
import json
import logging
from pathlib import Path

from src.utils.appending import append_lines

log = logging.getLogger(__name__)


def digest(*parts: str) -> str:
    """A short stable key of some texts."""
    return hashlib.sha256("\x1f".join(parts).encode()).hexdigest()[:16]


class PlanCache:
    """One JSONL file per (model, template) under `folder`, a line per question:
    {"question": key, "plan": text}. Appending lines keeps concurrent writers harmless: a
    question planned twice is stored twice, identically (greedy decoding)."""

    def __init__(self, folder: str | Path, model: str, template: str) -> None:
        self.path = Path(folder) / f"{digest(model, template)}.jsonl"
        self.plans: dict[str, str] = {}
        if self.path.is_file():
            for line in self.path.read_text().splitlines():
                try:
                    entry = json.loads(line)
                    self.plans[entry["question"]] = entry["plan"]
                except (json.JSONDecodeError, KeyError, TypeError):
                    continue  # a line cut short by a stopped run: that plan is made again

    def get(self, question: str) -> str | None:
        """The stored plan of a question, or None."""
        return self.plans.get(digest(question))

    def add(self, plans: dict[str, str]) -> None:
        """Store question -> plan pairs."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        lines = []
        for question, plan in plans.items():
            self.plans[digest(question)] = plan
            lines.append(json.dumps({"question": digest(question), "plan": plan}) + "\n")
        append_lines(self.path, "".join(lines))


def read_plan(text: str) -> tuple[str, bool]:
    """The plan as compact JSON when the text holds a JSON object (a prefix of prose or a code
    fence around it is fine, and so is an object the planner's token limit cut short: see
    `closed_object`), else the text itself; and whether it was JSON."""
    start = text.find("{")
    if start >= 0:
        value = _object(text[start:])
        if value is None:
            value = closed_object(text[start:])
        if value is not None:
            return json.dumps(value, ensure_ascii=False), True
    return " ".join(text.split()), False


def _object(text: str) -> dict | None:
    try:
        value, _ = json.JSONDecoder().raw_decode(text)
    except json.JSONDecodeError:
        return None
    return value if isinstance(value, dict) else None


def closed_object(text: str) -> dict | None:
    """A JSON object that `text` begins and never ends (generation stopped at its token
    limit, or went on past a bracket that does not match), closed: the text is read up to
    the mismatched bracket if there is one, an open string ends where the text does, then
    the open arrays and objects are closed. Where that does not parse (the text stops after
    a key, or a comma), it is cut back to before its last comma outside a string and closed
    again. None when no cut parses into an object with a member."""
    expected: list[str] = []  # the closing bracket of every open one, innermost last
    in_string = escaped = False
    states: list[tuple[bool, tuple[str, ...]]] = []  # after each character read
    commas: list[int] = []
    for i, char in enumerate(text):
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in "{[":
            expected.append("}" if char == "{" else "]")
        elif char in "}]":
            if not expected or char != expected[-1]:
                text = text[:i]  # a bracket that closes nothing open: the object ends here
                break
            expected.pop()
            if not expected:
                return None  # the object closed: `raw_decode` would have read it
        elif char == ",":
            commas.append(i)
        states.append((in_string, tuple(expected)))
    for end in [len(text), *reversed(commas)]:
        if end == 0:
            continue
        in_string, brackets = states[end - 1]
        candidate = text[:end]
        if in_string:
            if end != len(text):
                continue
            candidate = candidate.removesuffix("\\") + '"'
        value = _object(candidate + "".join(reversed(brackets)))
        if value:  # an object with at least one member
            return value
    return None
