"""An exclusive lock on a file, held for a block: processes that take the same lock run their
blocks one at a time (POSIX `flock`; released when the block ends or the process dies).
Where `flock` does not exist the block runs unlocked."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

try:
    import fcntl
except ImportError:  # not on POSIX: no lock
    fcntl = None


@contextlib.contextmanager
def exclusive_lock(path: Path) -> Iterator[None]:
    """Hold an exclusive `flock` on `path` (created, with its folder, if missing)."""
    if fcntl is None:
        yield
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
