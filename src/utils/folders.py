"""Folders a run writes: published whole (model builds, conversions and warm starts are read by
other jobs of a sweep while this one writes them), and checked writable before a run starts."""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

from src.utils.errors import ConfigError

log = logging.getLogger(__name__)


@contextlib.contextmanager
def published_folder(folder: str | Path) -> Iterator[Path]:
    """Yield a scratch folder private to this process; when the block ends it becomes `folder`
    in one rename, so a reader sees no folder or a complete one, never half of one.

    A stale `folder` (incomplete, by the caller's test) must be removed by the caller first. If
    another process published `folder` meanwhile, its copy is kept and this one is dropped. If
    the block raises, the scratch folder is removed.
    """
    folder = Path(folder)
    scratch = folder.with_name(f"{folder.name}.partial-{os.getpid()}")
    shutil.rmtree(scratch, ignore_errors=True)
    scratch.mkdir(parents=True)
    try:
        yield scratch
    except BaseException:
        shutil.rmtree(scratch, ignore_errors=True)
        raise
    try:
        scratch.rename(folder)
    except OSError:
        if not folder.exists():
            raise
        log.info("%s was written by another process meanwhile; keeping that copy", folder)
        shutil.rmtree(scratch, ignore_errors=True)


def check_writable(path: Path, key: str) -> None:
    """Raise `ConfigError` naming `key` unless `path` (a folder, or a folder to be) can be
    written: a folder is made and removed at once in its nearest existing ancestor (or in it),
    so that what the user may write is asked of the file system itself (permission bits say
    root may write into /proc, where nothing can be made)."""
    existing = path
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    try:
        if not existing.is_dir():
            raise NotADirectoryError(existing)
        shutil.rmtree(tempfile.mkdtemp(prefix=".writable-", dir=existing))
    except OSError:
        raise ConfigError(
            f"{key}={path}: {existing} is not a writable folder; point {key} somewhere this "
            "user can write, or set it to null"
        ) from None
