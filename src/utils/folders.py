"""Folders that other processes read while this one writes them: model builds, conversions and
warm starts shared by the jobs of a sweep running at once."""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
from collections.abc import Iterator
from pathlib import Path

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
