"""Shared fixtures: compose the real config (as `python -m src.train` would) and shrink it."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile

# Tests never reach a model hub: fail at once instead of retrying for a minute. Set before
# transformers is imported, which reads it once.
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from hydra.core.global_hydra import GlobalHydra
from omegaconf import DictConfig

from src.model.causal_lm import CausalLM, load_causal_lm
from src.model.fast.probe import forget_verdicts
from src.model.tiny import build_tiny_llama
from src.utils import per_machine
from src.utils.compose import compose_train_config
from src.utils.resolvers import PROJECT_ROOT
from tests.helpers.dense_reward import OVERRIDES as DENSE_REWARD
from tests.helpers.warm_start import FOLDER_FILE, warm_tiny_folder

# A run small enough for a 2-core CPU: no warm start, 2 prompts x 4 completions, 4 tokens,
# and a reward the untrained model earns some of the time, so every update moves the weights.
TINY = [
    "model=tiny",
    *DENSE_REWARD,
    "sft.enabled=false",
    "trainer.max_steps=2",
    "trainer.enable_model_summary=false",
    "data.batch_size=2",
    "data.val_size=8",
    "data.eval_batch_size=8",
    "algo.group_size=4",
    "algo.max_completion_length=4",
    "algo.samples_every_n_steps=1",
]


@pytest.fixture(scope="session")
def models_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One folder of built models for the whole session: the tiny model is built once."""
    return tmp_path_factory.mktemp("models")


@pytest.fixture(scope="session")
def tiny_lm(models_dir: Path) -> CausalLM:
    """The built-in tiny Llama, loaded through `load_causal_lm` (random weights, seed 0)."""
    return load_causal_lm(str(models_dir / "tiny_llama_h128_l4"), builder=build_tiny_llama)


WARM_START = pytest.StashKey[tuple[Path, subprocess.Popen]]()


@pytest.hookimpl(trylast=True)  # after `-m` and `-k` have deselected what will not run
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Start the shared warm start (`warm_tiny`) in a process of its own at once, where a
    selected test needs it: it then trains while the tests before that one run."""
    if not any("warm_tiny" in getattr(item, "fixturenames", ()) for item in items):
        return
    root = Path(tempfile.mkdtemp(prefix="warm_tiny_"))
    env = {**os.environ, per_machine.FOLDER_VARIABLE: str(root / "machine_cache")}
    with (root / "warm_start.log").open("w") as log:
        process = subprocess.Popen(
            [sys.executable, "-m", "tests.helpers.warm_start", str(root)],
            cwd=PROJECT_ROOT,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    config.stash[WARM_START] = (root, process)


def pytest_unconfigure(config: pytest.Config) -> None:
    root, process = config.stash.get(WARM_START, (None, None))
    if process is not None:
        if process.poll() is None:
            process.kill()
            process.wait()
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope="session")
def warm_tiny(
    request: pytest.FixtureRequest, models_dir: Path, tmp_path_factory: pytest.TempPathFactory
) -> list[str]:
    """Overrides that start a run from the tiny model after the embedded default's warm start
    (what `make train` does first: SFT until right on about a third of held-back sums), trained
    once per session in about a minute, in the process the collection started (in this one
    where none was). Its held-out accuracy is between 0.2 and 0.6 and its answers differ by
    question, so evaluations and searches on it can tell models apart. Slow tests only: the
    fixture alone takes longer than a fast test may."""
    root, process = request.config.stash.get(WARM_START, (None, None))
    if process is None:
        folder = warm_tiny_folder(tmp_path_factory.mktemp("warm"), models_dir)
    else:
        code = process.wait(timeout=1800)
        log = (root / "warm_start.log").read_text()
        assert code == 0, f"the warm start process failed:\n{log[-3000:]}"
        folder = (root / FOLDER_FILE).read_text()
    return [f"model.name_or_path={folder}", "model.builder=null", "sft.enabled=false"]


@pytest.fixture
def make_cfg(tmp_path: Path, models_dir: Path) -> Callable[..., DictConfig]:
    """Compose `conf/train.yaml` with overrides, writing everything under tmp_path."""

    def make(*overrides: str, tiny: bool = True) -> DictConfig:
        return compose_train_config(
            [
                *(TINY if tiny else []),
                f"paths.output_root={tmp_path / 'outputs'}",
                f"paths.models_dir={models_dir}",
                f"paths.run_dir={tmp_path / 'run'}",
                *overrides,
            ]
        )

    yield make
    GlobalHydra.instance().clear()


@pytest.fixture(scope="session", autouse=True)
def machine_measurements(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The suite's per-machine measurements (`src.utils.per_machine`) in a folder of its own,
    shared by the training processes the tests start, and kept out of the user's cache."""
    folder = tmp_path_factory.mktemp("machine_cache")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(per_machine.FOLDER_VARIABLE, str(folder))
        yield folder


@pytest.fixture(autouse=True)
def fresh_probes() -> Iterator[None]:
    """Each test probes the fast paths anew: a verdict a test planted stays in that test."""
    forget_verdicts()
    yield
    forget_verdicts()
