"""Files tests write: JSONL rows, free ports."""

from __future__ import annotations

import json
import socket
from pathlib import Path


def write_jsonl(path: Path, rows: list[dict | str]) -> Path:
    """One JSON object per line; a string row is written as it is (a broken line on purpose)."""
    lines = [row if isinstance(row, str) else json.dumps(row) for row in rows]
    path.write_text("".join(line + "\n" for line in lines))
    return path


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]
