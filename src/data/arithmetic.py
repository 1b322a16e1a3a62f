"""The embedded default data: integer arithmetic problems generated from a seed."""

from __future__ import annotations

import itertools
import random
from typing import Any

from src.utils.errors import ConfigError

OPERATIONS = {"+": lambda a, b: a + b, "-": lambda a, b: a - b, "*": lambda a, b: a * b}
KINDS = {"+": "addition", "-": "subtraction", "*": "multiplication"}  # a row's `subject`


def arithmetic_problems(
    seed: int = 0, operations: str = "+", low: int = 10, high: int = 99
) -> list[dict[str, Any]]:
    """Every `a op b` with low <= a, b <= high, shuffled by `seed`: a finite, exactly known set.

    Each row holds `question` ("What is 37 + 48?"), the gold `answer` ("85") and its kind,
    `subject` ("addition"), which `data.unseen.kinds` can hold out.
    """
    unknown = set(operations) - set(OPERATIONS)
    if unknown or not operations:
        raise ConfigError(f"data.operations may only hold {sorted(OPERATIONS)}, got {operations!r}")
    if low > high:
        raise ConfigError(f"data.low ({low}) must not exceed data.high ({high})")
    rows = [
        {
            "question": f"What is {a} {op} {b}?",
            "answer": str(OPERATIONS[op](a, b)),
            "subject": KINDS[op],
        }
        for op in operations
        for a, b in itertools.product(range(low, high + 1), repeat=2)
    ]
    random.Random(seed).shuffle(rows)
    return rows
