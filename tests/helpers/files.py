"""Files tests write: JSONL rows."""

from __future__ import annotations

import json
from pathlib import Path


def write_jsonl(path: Path, rows: list[dict | str]) -> Path:
    """One JSON object per line; a string row is written as it is (a broken line on purpose)."""
    lines = [row if isinstance(row, str) else json.dumps(row) for row in rows]
    path.write_text("".join(line + "\n" for line in lines))
    return path
