"""A frozen planner's plans, kept on disk so they are generated once per model, prompt template
and question, however many runs and sweep jobs use them."""

from __future__ import annotations

import hashlib
import json
import logging
from pathlib import Path

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
        with self.path.open("a") as file:
            file.write("".join(lines))


def read_plan(text: str) -> tuple[str, bool]:
    """The plan as compact JSON when the text holds a JSON object (a prefix of prose or a code
    fence around it is fine), else the text itself; and whether it was JSON."""
    start = text.find("{")
    if start >= 0:
        try:
            value, _ = json.JSONDecoder().raw_decode(text[start:])
        except json.JSONDecodeError:
            value = None
        if isinstance(value, dict):
            return json.dumps(value, ensure_ascii=False), True
    return " ".join(text.split()), False
