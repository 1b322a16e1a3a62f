"""The algorithm named wins: an `algo=` file's method keys are what a run uses under every task
and preset unless the command line sets them, and the run's method table says where any other
value came from (docs/configuration.md, "Which value wins")."""

from __future__ import annotations

from pathlib import Path

import pytest
from omegaconf import OmegaConf

from src.grpo.settings import METHOD_KEYS
from src.runs.method import algo_file, run_method
from src.utils.compose import compose_train_config
from src.utils.config import plain
from src.utils.resolvers import PROJECT_ROOT

CONF = PROJECT_ROOT / "conf"
ALGOS = sorted(path.stem for path in (CONF / "algo").glob("*.yaml"))
TASKS = sorted(path.stem for path in (CONF / "task").glob("*.yaml"))
PRESETS = sorted(path.stem for path in (CONF / "preset").glob("*.yaml"))
# A task that has a method of its own names it with `override /algo:`; the others run grpo.
TASK_ALGO = {
    **{task: task for task in ("math", "reader", "char_diffusion")},
    "medqa_rewriter": "medqa_rewriter_gemma",
    "medqa_rewriter_smollm2": "medqa_rewriter",
    "medqa_searcher": "medqa_searcher_gdpo",
}


def method_keys(*overrides: str) -> dict:
    cfg = compose_train_config([*overrides, "paths.run_dir=unused"])
    return {key: plain(cfg.algo)[key] for key in METHOD_KEYS}


def file_keys(algo: str) -> dict:
    own = algo_file(algo)
    assert own is not None, algo
    return {key: own[key] for key in METHOD_KEYS}


def algo_keys_set_by(path: Path) -> set[str]:
    """The `algo.*` method keys a config file sets itself (its `algo:` mapping)."""
    text = OmegaConf.load(path)
    node = text if "@package algo" in path.read_text() else text.get("algo")
    return set(plain(node) or {}) & set(METHOD_KEYS) if node is not None else set()


def test_no_config_outside_conf_algo_sets_a_method_key() -> None:
    """Tasks, presets, experiments and every other group set sizes only; a method key is the
    algo file's (a sweep's search space, hparams_search, is the command line's)."""
    setters = {
        str(path.relative_to(CONF)): algo_keys_set_by(path)
        for path in CONF.rglob("*.yaml")
        if path.parent.name not in ("algo", "hparams_search")
    }
    assert {path: keys for path, keys in setters.items() if keys} == {}


def test_the_file_reader_composes_every_algo_as_hydra_does() -> None:
    """`algo_file` (the method table's account of an algo file) agrees with Hydra."""
    for algo in ALGOS:
        assert method_keys(f"algo={algo}") == file_keys(algo), algo


@pytest.mark.slow  # 91 compositions, 0.2 s each
def test_the_named_algo_wins_under_every_task_and_preset() -> None:
    """Every algo with every task and with every preset (each task and preset pair meets two
    algos), and every task with no algo named, under each preset in turn: the method keys are
    the named algo file's, or the task's own algo file's where none is named. (All 504 at once:
    `python scripts/method_table.py`.)"""
    table = []
    for t, task in enumerate(TASKS):
        for a, algo in enumerate(ALGOS):
            preset = PRESETS[(t + a) % len(PRESETS)]
            composed = method_keys(f"task={task}", f"preset={preset}", f"algo={algo}")
            table.append((algo, task, preset, composed == file_keys(algo)))
        preset = PRESETS[t % len(PRESETS)]
        own = TASK_ALGO.get(task, "grpo")
        composed = method_keys(f"task={task}", f"preset={preset}")
        table.append((f"({own})", task, preset, composed == file_keys(own)))
    assert {(algo, preset) for algo, _, preset, _ in table if algo in ALGOS} == {
        (algo, preset) for algo in ALGOS for preset in PRESETS
    }
    assert {preset for algo, _, preset, _ in table if algo not in ALGOS} == set(PRESETS)
    assert [row for row in table if not row[3]] == []


def test_dapo_with_a_run_size_preset_keeps_dapos_kl_weight() -> None:
    keys = method_keys("algo=dapo", "preset=fast_test")
    assert keys["kl_beta"] == 0.0 and keys["loss_type"] == "dapo"
    assert method_keys("task=reader", "algo=gspo")["kl_beta"] == 0.0
    assert method_keys("task=reader")["top_k_ratio"] == 0.5


def test_the_method_table_names_what_is_not_the_algo_files() -> None:
    cfg = compose_train_config(["algo=dapo", "algo.kl_beta=0.05", "paths.run_dir=unused"])
    method = run_method(cfg)
    assert (method.algo, method.chosen_by) == ("dapo", "command line")
    assert [(row.key, row.value, row.file_value, row.source) for row in method.changed()] == [
        ("kl_beta", 0.05, 0.0, "command line")
    ]
    assert method.params() == {
        "method.algo": "dapo",
        "method.chosen_by": "command line",
        "method.changed": "kl_beta=0.05 (command line)",
    }
    assert "kl_beta" in method.table() and "<- command line; algo/dapo.yaml: 0.0" in method.table()
    assert len(method.table().splitlines()) == len(METHOD_KEYS) + 1


@pytest.mark.parametrize(
    ("overrides", "algo", "chosen_by"),
    [
        ((), "grpo", "default"),
        (("task=reader",), "reader", "task=reader"),
        (("task=reader", "algo=rloo"), "rloo", "command line"),
        (("experiment=arithmetic_dapo",), "dapo", "experiment=arithmetic_dapo"),
    ],
)
def test_who_chose_the_algo_file(overrides, algo, chosen_by) -> None:
    method = run_method(compose_train_config([*overrides, "paths.run_dir=unused"]))
    assert (method.algo, method.chosen_by, method.changed()) == (algo, chosen_by, [])


def test_an_algo_file_outside_conf_has_no_account(tmp_path) -> None:
    (tmp_path / "mine.yaml").write_text("defaults:\n  - /other@x: y\n  - _self_\nkl_beta: 1.0\n")
    (tmp_path / "plain.yaml").write_text("kl_beta: 0.5\n")
    assert algo_file("mine", tmp_path) is None
    assert algo_file("missing", tmp_path) is None
    assert algo_file("plain", tmp_path) == {"kl_beta": 0.5}
