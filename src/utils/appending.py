"""Appending lines to the append-only files a run keeps (the plan cache, the tracking fallback's
calls): a file a stopped run left with a half-written last line gets the new lines after it, on a
line of their own, so the half line is the only one lost (and readers skip it)."""

from __future__ import annotations

import os
from pathlib import Path


def append_lines(path: str | Path, text: str) -> None:
    """Append `text` (whole lines, each ending in a newline) to `path`, starting a fresh line
    first when the file does not end in one."""
    path = Path(path)
    with path.open("ab+") as file:
        file.seek(0, os.SEEK_END)
        broken = False
        if file.tell() > 0:
            file.seek(-1, os.SEEK_END)
            broken = file.read(1) != b"\n"
        file.write((("\n" if broken else "") + text).encode())
