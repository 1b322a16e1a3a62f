"""A real `mlflow server` on a free localhost port, for the tests that need one."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

import pytest

from src.tracking.local_server import ServerDidNotStart, local_mlflow


@contextlib.contextmanager
def mlflow_server(
    store_uri: str, artifact_root: Path, log: Path, port: int | None = None
) -> Iterator[str]:
    """Serve `store_uri` (on `port`, or a free one) until the block ends (or the test kills
    it); yields the address."""
    arguments = ["server", "--backend-store-uri", store_uri]
    arguments += ["--default-artifact-root", str(artifact_root), "--workers", "1"]
    try:
        with local_mlflow(arguments, log, port) as address:
            yield address
    except ServerDidNotStart as error:
        pytest.fail(f"{error}:\n{log.read_text()[-3000:]}")
