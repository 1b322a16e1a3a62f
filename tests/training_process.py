"""A training run in its own process, for the tests that signal, kill or starve it."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import time
from pathlib import Path

from src.utils.resolvers import PROJECT_ROOT

# The tiny model, no warm start, 2 prompts x 4 completions of at most 4 tokens per step.
TINY_RUN = [
    "model=tiny", "sft.enabled=false", "data.batch_size=2", "data.val_size=8",
    "algo.group_size=4", "algo.max_completion_length=4",
]  # fmt: skip


def start_training(*overrides: str) -> subprocess.Popen:
    """`python -m src.train overrides...`, output captured as text, no standard input."""
    return subprocess.Popen(
        [sys.executable, "-m", "src.train", *overrides],
        cwd=PROJECT_ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        text=True,
    )


def logged_steps(database: Path) -> int:
    """How many `loss` values the store holds so far (0 before it exists)."""
    if not database.exists():
        return 0
    try:
        with sqlite3.connect(database, timeout=5) as connection:
            (count,) = connection.execute(
                "select count(*) from metrics where key = 'loss'"
            ).fetchone()
    except sqlite3.OperationalError:  # tables not created yet
        return 0
    return count


def wait_for_steps(process: subprocess.Popen, database: Path, steps: int) -> None:
    """Return once the SQLite store `database` holds `steps` loss values; fail if the process
    ends first or nothing comes within 3 minutes."""
    deadline = time.monotonic() + 180
    while logged_steps(database) < steps:
        assert process.poll() is None, process.stdout.read()[-3000:]
        assert time.monotonic() < deadline, "training did not get that far"
        time.sleep(0.05)
