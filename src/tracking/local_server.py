"""An MLflow server on a free localhost port, for as long as a block runs: what the tests that
need a real server and the docs' screenshot script (`scripts/artifact_screenshot.py`) start."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

START_SECONDS = 120  # the longest a server may take to answer its health check


class ServerDidNotStart(RuntimeError):
    """The server exited or did not answer within `START_SECONDS`."""


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@contextlib.contextmanager
def local_mlflow(
    arguments: list[str], log: Path | None = None, port: int | None = None
) -> Iterator[str]:
    """`mlflow ARGUMENTS --host 127.0.0.1 --port P` (`server ...` or `ui ...`; P a free port, or
    `port`) until the block ends, its output appended to `log` (or dropped); yields its address
    once it answers, and kills its process group after. No job runners: MLflow's scheduled
    and GenAI jobs would start five processes nothing here uses."""
    port = port or free_port()
    command = [str(Path(sys.executable).with_name("mlflow")), *arguments]
    command += ["--host", "127.0.0.1", "--port", str(port)]
    environment = {**os.environ, "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false"}
    with contextlib.ExitStack() as stack:
        sink = stack.enter_context(log.open("a")) if log else subprocess.DEVNULL
        server = subprocess.Popen(
            command, stdout=sink, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            start_new_session=True, env=environment,
        )  # fmt: skip
        address = f"http://127.0.0.1:{port}"
        try:
            deadline = time.monotonic() + START_SECONDS
            while True:
                try:
                    urllib.request.urlopen(f"{address}/health", timeout=2).read()
                    break
                except OSError:
                    if server.poll() is not None or time.monotonic() > deadline:
                        raise ServerDidNotStart(f"mlflow {arguments[0]} did not start") from None
                    time.sleep(0.5)
            yield address
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(server.pid, signal.SIGKILL)
            server.wait(timeout=30)
