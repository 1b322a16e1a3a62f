"""A real `mlflow server` on a free localhost port, for the tests that need one."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers.files import free_port


@contextlib.contextmanager
def mlflow_server(
    store_uri: str, artifact_root: Path, log: Path, port: int | None = None
) -> Iterator[str]:
    """Serve `store_uri` until the block ends (or the test kills it); yields the address."""
    port = port or free_port()
    mlflow_cli = Path(sys.executable).with_name("mlflow")
    with log.open("a") as sink:
        server = subprocess.Popen(
            [
                str(mlflow_cli), "server",
                "--backend-store-uri", store_uri,
                "--default-artifact-root", str(artifact_root),
                "--host", "127.0.0.1", "--port", str(port), "--workers", "1",
            ],
            stdout=sink,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
            # no job runners (MLflow's scheduled and GenAI jobs): five processes the tests
            # never use, each importing MLflow while the server starts
            env={**os.environ, "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false"},
        )  # fmt: skip
        address = f"http://127.0.0.1:{port}"
        try:
            deadline = time.monotonic() + 120
            while True:
                try:
                    urllib.request.urlopen(f"{address}/health", timeout=2).read()
                    break
                except OSError:
                    if server.poll() is not None or time.monotonic() > deadline:
                        pytest.fail(f"mlflow server did not start:\n{log.read_text()[-3000:]}")
                    time.sleep(0.5)
            yield address
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(server.pid, signal.SIGKILL)
            server.wait(timeout=30)
