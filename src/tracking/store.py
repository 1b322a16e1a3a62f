"""A local SQLite tracking store that several runs open at once.

MLflow creates a new SQLite store's tables (and upgrades an old one's) on the first client
that opens it, with no lock: two runs started together on a fresh `outputs/mlflow.db` (a
parallel sweep, or two jobs launched side by side) both try, and all but one fail with
"table ... already exists" or an Alembic version error. Two runs of one new experiment race
the same way to create it. `ensure_store` opens the store, and makes the experiment, under an
exclusive lock on a file beside it: the first run creates the tables while the others wait and
then find them made.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from src.utils.file_lock import exclusive_lock

SQLITE = "sqlite:///"


def sqlite_file(tracking_uri: str | None) -> Path | None:
    """The database file of a `sqlite:///PATH` tracking URI (query part dropped); None for
    any other store (a server, a folder, Databricks), which creates its tables itself."""
    if not tracking_uri or not str(tracking_uri).startswith(SQLITE):
        return None
    path = str(tracking_uri)[len(SQLITE) :].split("?", 1)[0]
    return Path(path) if path and path != ":memory:" else None


@contextlib.contextmanager
def store_lock(tracking_uri: str | None) -> Iterator[None]:
    """Hold an exclusive lock on `<database>.lock` for a SQLite store (nothing for others)."""
    path = sqlite_file(tracking_uri)
    if path is None:
        yield
        return
    with exclusive_lock(path.with_name(path.name + ".lock")):
        yield


def experiment_id(client: Any, name: str, artifact_location: str | None = None) -> str:
    """The id of experiment `name`, created (with `artifact_location`) when missing; one that
    another process created in between is found instead."""
    experiment = client.get_experiment_by_name(name)
    if experiment is not None:
        return experiment.experiment_id
    try:
        return client.create_experiment(name, artifact_location=artifact_location)
    except Exception:  # another process created it in between
        return client.get_experiment_by_name(name).experiment_id


def ensure_store(
    tracking_uri: str | None,
    experiment_name: str | None = None,
    artifact_location: str | None = None,
) -> None:
    """Open a SQLite tracking store once under `store_lock`, so that its tables exist, at
    MLflow's current version, and so does the experiment `experiment_name` (made with
    `artifact_location` when new), before this process's clients use them."""
    if sqlite_file(tracking_uri) is None:
        return
    from mlflow import MlflowClient

    with store_lock(tracking_uri):
        client = MlflowClient(tracking_uri=tracking_uri)
        if experiment_name is not None:
            experiment_id(client, experiment_name, artifact_location)
