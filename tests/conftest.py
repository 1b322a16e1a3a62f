"""Shared fixtures: compose the real config (as `python -m src.train` would) and shrink it."""

from __future__ import annotations

import os

# Tests never reach a model hub: fail at once instead of retrying for a minute. Set before
# transformers is imported, which reads it once.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
# Under `pytest -n N` (pytest-xdist) each worker gets its share of the cores, it and the
# training processes it starts, so N workers never ask for more threads than there are cores.
if "PYTEST_XDIST_WORKER_COUNT" in os.environ:
    _share = str(max(1, (os.cpu_count() or 1) // int(os.environ["PYTEST_XDIST_WORKER_COUNT"])))
    for _variable in ("OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ.setdefault(_variable, _share)

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from hydra.core.global_hydra import GlobalHydra
from omegaconf import DictConfig

from src.model.causal_lm import CausalLM, load_causal_lm
from src.model.fast.probe import forget_verdicts
from src.model.tiny import build_tiny_llama
from src.runs.parts import build_run_parts, warm_started
from src.utils import per_machine
from src.utils.compose import compose_train_config
from tests.helpers.dense_reward import OVERRIDES as DENSE_REWARD
from tests.helpers.empty_store import with_empty_store
from tests.helpers.workers import one_at_a_time, shared_folder

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
    "data.max_val_rows=8",  # the unseen split's rows too, where a task has one
    "data.eval_batch_size=8",
    "algo.group_size=4",
    "algo.max_completion_length=4",
    "algo.samples_every_n_steps=1",
    "room.k=4",
]


@pytest.fixture(scope="session")
def models_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One folder of built models for the whole session: the tiny model is built once."""
    return tmp_path_factory.mktemp("models")


@pytest.fixture(scope="session")
def tiny_lm(models_dir: Path) -> CausalLM:
    """The built-in tiny Llama, loaded through `load_causal_lm` (random weights, seed 0)."""
    return load_causal_lm(str(models_dir / "tiny_llama_h128_l4"), builder=build_tiny_llama)


@pytest.fixture(scope="session")
def warm_tiny(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    """Overrides that start a run from the tiny model after the embedded default's warm start
    (what `make train` does first: SFT until right on about a third of held-back sums), trained
    once per session in about a minute. Its held-out accuracy is between 0.2 and 0.6 and its
    answers differ by question, so evaluations and searches on it can tell models apart.
    Slow tests only: the fixture alone takes longer than a fast test may."""
    root = shared_folder(tmp_path_factory, "warm")  # trained by one worker of `pytest -n N`
    with one_at_a_time(root):  # the others find it in the warm-start cache
        cfg = compose_train_config(
            [
                f"paths.output_root={root}",
                f"paths.models_dir={root / 'models'}",
                f"paths.run_dir={root}",
            ]
        )
        GlobalHydra.instance().clear()
        parts = build_run_parts(cfg)  # seeded as `python -m src.train` seeds it
        folder = warm_started(cfg, parts, [])
    return [f"model.name_or_path={folder}", "model.builder=null", "sft.enabled=false"]


@pytest.fixture
def make_cfg(tmp_path: Path, models_dir: Path) -> Callable[..., DictConfig]:
    """Compose `conf/train.yaml` with overrides, writing everything under tmp_path (whose
    store starts as a copy of an empty one: `tests.helpers.empty_store`)."""
    with_empty_store(tmp_path / "outputs")

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
    """Each test probes the fast paths anew: a verdict a test planted stays in that test, and so
    does a per-machine choice a continued run pinned."""
    forget_verdicts()
    per_machine.unpin()
    yield
    forget_verdicts()
    per_machine.unpin()
