"""A child run with `run_bound` ends with the process that started it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from src.utils.child import run_bound
from src.utils.resolvers import PROJECT_ROOT

WAIT_SECONDS = 30.0  # the longest the test waits for a process to appear or end (not a timing)


def alive(pid: int) -> bool:
    """Whether `pid` runs (a zombie counts as ended)."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().split(")")[-1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def wait_for(condition, what: str) -> None:
    deadline = time.monotonic() + WAIT_SECONDS
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"{what} within {WAIT_SECONDS} s")
        time.sleep(0.05)


def test_returns_the_exit_status(tmp_path: Path) -> None:
    assert run_bound([sys.executable, "-c", "raise SystemExit(3)"], cwd=tmp_path) == 3
    assert run_bound([sys.executable, "-c", "pass"]) == 0


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
@pytest.mark.parametrize("how", [signal.SIGKILL, signal.SIGINT])
def test_the_child_ends_when_its_parent_is_stopped(tmp_path: Path, how: signal.Signals) -> None:
    """A parent killed outright (the kernel's death signal) or interrupted (the wait's
    cleanup) takes its child with it."""
    pid_file = tmp_path / "child.pid"
    child = (
        f"import os, time; open({str(pid_file)!r}, 'w').write(str(os.getpid())); time.sleep(600)"
    )
    parent = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys; from src.utils.child import run_bound; "
            f"run_bound([sys.executable, '-c', {child!r}])",
        ],
        cwd=PROJECT_ROOT,
        # Ctrl-C as a terminal gives it: a test before this one in the same worker may have left
        # SIGINT ignored (Lightning does after a KeyboardInterrupt), which a child inherits
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),  # noqa: PLW1509
    )
    try:
        wait_for(lambda: pid_file.exists() and pid_file.read_text(), "the child started")
        child_pid = int(pid_file.read_text())
        assert alive(child_pid)
        parent.send_signal(how)
        parent.wait(timeout=WAIT_SECONDS)
        wait_for(lambda: not alive(child_pid), "the child ended with its parent")
    finally:
        if parent.poll() is None:
            parent.kill()
        if pid_file.exists() and pid_file.read_text() and alive(int(pid_file.read_text())):
            os.kill(int(pid_file.read_text()), signal.SIGKILL)
