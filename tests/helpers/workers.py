"""What the workers of one `pytest -n N` session (pytest-xdist) share: a folder, and a lock
that lets one of them make what the others then reuse. Without xdist there is one worker and
the folder is the session's own."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from filelock import FileLock


def shared_folder(factory: pytest.TempPathFactory, name: str) -> Path:
    """`name` under the session's temporary folder, the same one for every worker."""
    base = factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        base = base.parent  # each worker's base is a folder of the session's
    folder = base / name
    folder.mkdir(exist_ok=True)
    return folder


def one_at_a_time(folder: Path) -> FileLock:
    """A lock on `folder`: whoever holds it makes its contents, who comes next reuses them."""
    return FileLock(folder / ".lock")
