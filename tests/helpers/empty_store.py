"""A copy of one empty MLflow store for each test that trains in a fresh folder.

MLflow makes a new SQLite store's tables by running its migrations, about a second each time.
The suite makes one empty store per process and copies it where a test's run will look for its
store. Making a new store, several processes at once included, is tested where it is the
subject (tests/tracking/test_store.py), and by every run the suite starts without this copy.
"""

from __future__ import annotations

import atexit
import functools
import shutil
import tempfile
from collections.abc import Iterable
from pathlib import Path

from src.tracking.store import ensure_store
from src.tracking.sweep import keyed_overrides

DATABASE = "mlflow.db"  # the store's file under paths.output_root (conf/paths/default.yaml)


@functools.cache
def empty_store() -> Path:
    """The empty store of this process, made once and removed when the process ends."""
    folder = Path(tempfile.mkdtemp(prefix="empty_store_"))
    atexit.register(shutil.rmtree, folder, True)
    ensure_store(f"sqlite:///{folder / DATABASE}")
    return folder / DATABASE


def with_empty_store(folder: Path) -> None:
    """Give `folder` a copy of the empty store as its store, unless it has one already."""
    folder.mkdir(parents=True, exist_ok=True)
    if not (folder / DATABASE).exists():
        shutil.copyfile(empty_store(), folder / DATABASE)


def with_empty_store_for(overrides: Iterable[str]) -> None:
    """The same for the output folder a run's command-line overrides name, when they name
    one and leave the store where it is by default."""
    assigned = [item for item in overrides if "=" in item]  # not flags such as -m
    settings = {key: override.value() for key, override in keyed_overrides(assigned)}
    if "paths.output_root" in settings and "paths.mlflow_uri" not in settings:
        with_empty_store(Path(settings["paths.output_root"]))
