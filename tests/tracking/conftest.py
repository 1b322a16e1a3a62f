"""One real sweep, made once per session and shared by the tests that read it: the MLflow
record, the comparison notebook and the MLflow UI."""

from __future__ import annotations

import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import mlflow
import pytest

from src.utils.resolvers import PROJECT_ROOT
from tests.helpers.command import command

# Small runs of the tiny model: 2 prompts x group_size completions of 4 tokens, 4 steps,
# held-out evaluation at steps 0, 2 and 4.
SMALL_JOB = [
    "model=tiny",
    "sft.enabled=false",
    "trainer.max_steps=4",
    "trainer.val_check_interval=2",
    "trainer.enable_model_summary=false",
    "data.batch_size=2",
    "data.val_size=8",
    "algo.max_completion_length=4",
]

# The README's spelling, on a 3 x 2 grid: six jobs of the embedded arithmetic recipe, each
# starting from the session's warm start (`warm_tiny`, shared with the other slow tests), so that
# rewards and accuracy are not all zero; 6 GRPO steps, held-out evaluation at steps 0, 2, 4, 6.
SIX_JOB_SWEEP = [
    "algo.kl_beta=0.0,0.05,0.1",
    "algo.group_size=2,4",
    "trainer.max_steps=6",
    "trainer.val_check_interval=2",
    "trainer.enable_model_summary=false",
    "data.batch_size=4",
    "data.val_size=32",
]
SIX_JOB_STEPS = [1, 2, 3, 4, 5, 6]


def run_train(*args: str, timeout: int = 900) -> subprocess.CompletedProcess:
    """`python -m src.train ARGS` from the project root, as a user types it."""
    return subprocess.run(
        [sys.executable, "-m", "src.train", *args],
        cwd=PROJECT_ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
    )


@dataclass
class SweepStore:
    """A finished sweep: where it wrote and how long it took."""

    output_root: Path
    seconds: float
    log: str

    @property
    def tracking_uri(self) -> str:
        return f"sqlite:///{self.output_root}/mlflow.db"

    def client(self) -> mlflow.MlflowClient:
        return mlflow.MlflowClient(tracking_uri=self.tracking_uri)

    def runs(self, experiment: str = "arithmetic") -> list[mlflow.entities.Run]:
        client = self.client()
        found = client.get_experiment_by_name(experiment)
        assert found is not None, self.log[-3000:]
        return client.search_runs([found.experiment_id], max_results=1000)


def sweep(output_root: Path, *args: str, status: int = 0) -> SweepStore:
    """Run `python -m src.train -m ARGS` into output_root and check its exit status (1 where a
    job failed, after the others ran): in this
    process (`tests.helpers.command`; Hydra's basic launcher runs the jobs in it, one after
    another), or in a fresh interpreter for the submitit launcher, whose job processes unpickle
    the task function of a real `__main__`."""
    submitit = any(arg.startswith("hydra/launcher=submitit") for arg in args)
    start = time.perf_counter()
    args = ("-m", *args, f"paths.output_root={output_root}")
    result = run_train(*args) if submitit else command("src.train", *args)
    seconds = time.perf_counter() - start
    assert result.returncode == status, (result.stdout + result.stderr)[-4000:]
    return SweepStore(output_root, seconds, result.stdout + result.stderr)


@pytest.fixture(scope="session")
def six_job_sweep(tmp_path_factory: pytest.TempPathFactory, warm_tiny: list[str]) -> SweepStore:
    """`python -m src.train -m algo.kl_beta=0.0,0.05,0.1 algo.group_size=2,4 ...` (tiny model,
    warm-started)."""
    store = sweep(tmp_path_factory.mktemp("sweep"), *SIX_JOB_SWEEP, *warm_tiny)
    print(f"six-job sweep: {store.seconds:.1f} s")
    return store
