"""A training run in its own process, for the tests that signal, kill or starve it (the
process signals itself at a chosen step: `tests.helpers.signal_at_step`)."""

from __future__ import annotations

import os
import subprocess
import sys

from src.model.fast.probe import OFF_VARIABLE
from src.utils.resolvers import PROJECT_ROOT
from tests.helpers.dense_reward import OVERRIDES as DENSE_REWARD
from tests.helpers.empty_store import with_empty_store_for

# The tiny model, no warm start, 2 prompts x 4 completions of at most 4 tokens per step, and a
# reward the untrained model earns some of the time, so every update moves the weights.
TINY_RUN = [
    "model=tiny", "sft.enabled=false", "data.batch_size=2", "data.val_size=8",
    "algo.group_size=4", "algo.max_completion_length=4", *DENSE_REWARD,
]  # fmt: skip


def start_training(
    *overrides: str,
    one_thread: bool = False,
    kernels_chosen: bool = False,
    environment: dict[str, str] | None = None,
) -> subprocess.Popen:
    """`python -m src.train overrides...`, output captured as text, no standard input.
    `one_thread`: every CPU operation in one thread, so sums add in one order whatever the
    machine's load (runs compared to 1e-7 across processes); and, unless `kernels_chosen`,
    through torch's own products (oneDNN's path off: its per-machine verdict is not kept while
    the machine is busy, so processes side by side could each time it and differ; a test that
    pins the choices, `$GRPO_MACHINE_CHOICES` or a continuation, leaves them on). `environment`
    adds variables. A run given an output folder finds a copy of an empty store there
    (`tests.helpers.empty_store`)."""
    with_empty_store_for(overrides)
    threads = {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"} if one_thread else {}
    if one_thread and not kernels_chosen:
        off = [p for p in os.environ.get(OFF_VARIABLE, "").split(",") if p]
        threads[OFF_VARIABLE] = ",".join([*off, "onednn_products"])
    return subprocess.Popen(
        [sys.executable, "-m", "src.train", *overrides],
        env={**os.environ, **threads, **(environment or {})},
        cwd=PROJECT_ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        text=True,
    )
