"""A child process that ends with its parent: a stage's run (another task's `src.train`) must
not go on training when the run that started it is stopped.

Two guards: on Linux the child asks the kernel for SIGTERM when its parent dies
(`PR_SET_PDEATHSIG`, which also covers a parent killed outright), and on any exit from the wait
(Ctrl-C, an exception) the parent terminates the child itself, then kills it if it lingers.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

PR_SET_PDEATHSIG = 1  # linux/prctl.h
GRACE_SECONDS = 10.0  # how long a terminated child may take to end before it is killed


def _death_signal() -> Callable[[], None] | None:
    """A function the child runs before exec that asks for SIGTERM on its parent's death;
    None where the platform has no such request."""
    if not sys.platform.startswith("linux"):
        return None
    libc_name = ctypes.util.find_library("c")
    if libc_name is None:
        return None
    libc = ctypes.CDLL(libc_name, use_errno=True)
    parent = os.getpid()

    def request() -> None:
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
        if os.getppid() != parent:  # the parent died before the request took effect
            os.kill(os.getpid(), signal.SIGTERM)

    return request


def run_bound(command: list[str], cwd: Path | str | None = None) -> int:
    """Run `command` to its end and return its exit status; the child never outlives this
    process (module docstring)."""
    child = subprocess.Popen(command, cwd=cwd, preexec_fn=_death_signal())  # noqa: PLW1509
    try:
        return child.wait()
    finally:
        if child.poll() is None:
            child.terminate()
            try:
                child.wait(timeout=GRACE_SECONDS)
            except subprocess.TimeoutExpired:
                child.kill()
                child.wait()
