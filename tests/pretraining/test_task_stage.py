"""A stage that is another task's run (`task=medqa_searcher`'s rewriter): its folder is keyed by
its own settings and the seed, a given adapter is used as it is, a failed run is named, and
end to end the rewriter trains in a process of its own, once, before the searcher starts from
its adapter."""

from __future__ import annotations

from pathlib import Path

import pytest

from src.eval import evaluate
from src.pretraining import task_run
from src.pretraining.folders import stage_checkpoint
from src.pretraining.task_run import task_command, train_task
from src.runs.parts import build_run_parts
from src.train import train
from src.utils.config import build
from src.utils.errors import ConfigError, MissingFileError, UserError
from tests.helpers.mlflow_runs import runs_in

SMALL = [  # a run of either task small enough for the tiny model
    "hardware=[cpu,lora]",
    "data.batch_size=2",
    "data.val_size=4",
    "data.max_val_rows=4",  # the unseen split too (the searcher scores 40 rows otherwise)
    "algo.group_size=2",
    "algo.max_completion_length=6",
    "trainer.max_steps=1",
    "room.k=2",
    "room.eval_rows=4",
]
SEARCHER = ["task=medqa_searcher", "model=tiny", *SMALL, "trainer.val_check_interval=1"]


def rewriter_folder(make_cfg, *overrides: str) -> str:
    return stage_checkpoint("rewriter", make_cfg(*SEARCHER, *overrides, tiny=False))


def test_the_rewriters_folder_is_keyed_by_its_own_settings_not_the_searchers(make_cfg):
    folder = rewriter_folder(make_cfg)
    assert Path(folder).parent.name == "rewriter" and Path(folder).name.startswith("rewriter-")
    assert rewriter_folder(make_cfg, "data.oracle_share=0.25", "algo.kl_beta=0.1") == folder
    assert rewriter_folder(make_cfg, "seed=7") != folder
    assert rewriter_folder(make_cfg, "data.path=other.jsonl") != folder  # its questions too
    assert rewriter_folder(make_cfg, "model=gemma3_270m") != folder  # its base model too


def test_the_searcher_starts_from_the_rewriter_stages_adapter(make_cfg):
    cfg = make_cfg(*SEARCHER, tiny=False)
    assert cfg.model.adapter_path == stage_checkpoint("rewriter", cfg)
    assert cfg.rewriter_adapter is None  # the config keeps what was given
    assert cfg.stages.rewriter.train.overrides[0] == "model=tiny"  # the searcher's own model


def test_a_given_rewriter_adapter_is_used_and_a_folder_without_one_refused(make_cfg, tmp_path):
    cfg = make_cfg(*SEARCHER, tiny=False)
    build({**cfg.model, "adapter_path": None}).save(tmp_path / "adapter", merge=False)
    assert rewriter_folder(make_cfg, f"rewriter_adapter={tmp_path / 'adapter'}") == str(
        tmp_path / "adapter"
    )
    (tmp_path / "empty").mkdir()
    cfg = make_cfg(*SEARCHER, f"rewriter_adapter={tmp_path / 'empty'}", tiny=False)
    with pytest.raises(ConfigError, match=r"^rewriter_adapter=.*empty holds no such model, not a"):
        build_run_parts(cfg)


def test_the_rewriters_command_line(make_cfg, tmp_path):
    cfg = make_cfg(*SEARCHER, "seed=5", tiny=False)
    command = task_command(cfg, tmp_path / "out", "medqa_rewriter", ["model=tiny"])
    assert command[1:] == [
        "-m",
        "src.train",
        "task=medqa_rewriter",
        "seed=5",
        f"save_model={tmp_path / 'out'}",
        f"paths.output_root={cfg.paths.output_root}",
        "model=tiny",
    ]
    with pytest.raises(ConfigError, match="train.overrides must be a list of KEY=VALUE"):
        task_command(cfg, tmp_path, "medqa_rewriter", "model=tiny")


def test_a_failed_rewriter_run_is_named_with_its_command(make_cfg, tmp_path, monkeypatch):
    cfg = make_cfg(*SEARCHER, tiny=False)
    monkeypatch.setattr(task_run, "run_bound", lambda command, **_: 3)
    with pytest.raises(UserError) as caught:
        train_task(tmp_path, cfg, None, [], False, task="medqa_rewriter", overrides=["x=1"])
    message = str(caught.value)
    assert message.startswith("the medqa_rewriter run this stage needs failed (exit 3)")
    assert "python -m src.train task=medqa_rewriter" in message and "\n" not in message


def test_scoring_the_searcher_before_its_rewriter_is_trained_says_what_to_run(make_cfg, tmp_path):
    cfg = make_cfg(*SEARCHER, tiny=False)
    with pytest.raises(
        MissingFileError, match=r"^stage rewriter is not trained .*rewriter_adapter"
    ):
        evaluate(cfg, heads=["base"], output_dir=tmp_path / "eval")


@pytest.mark.slow
def test_the_rewriter_trains_once_in_its_own_run_and_the_searcher_starts_from_it(
    make_cfg, models_dir, tmp_path
):
    small = [f"paths.models_dir={models_dir}", *SMALL]  # the rewriter's run
    cfg = make_cfg(*SEARCHER, f"save_model={tmp_path / 'searcher'}", tiny=False)
    cfg.stages.rewriter.train.overrides.extend(small)  # after the shipped ones: these win
    train(cfg)
    folder = Path(stage_checkpoint("rewriter", cfg))
    assert (folder / "adapter_config.json").is_file() and (folder / "stage.json").is_file()
    (rewriter,) = runs_in(cfg.paths.mlflow_uri, "medqa_rewriter")  # a run of its own
    assert rewriter.info.status == "FINISHED" and rewriter.data.params["seed"] == "42"
    (searcher,) = runs_in(cfg.paths.mlflow_uri, "medqa_searcher")
    assert searcher.data.tags["stage.rewriter"] == str(folder)
    assert (tmp_path / "searcher" / "adapter_config.json").is_file()

    again = make_cfg(*SEARCHER, "trainer.max_steps=2", tiny=False)  # the rewriter is cached
    again.stages.rewriter.train.overrides.extend(small)
    train(again)
    assert stage_checkpoint("rewriter", again) == str(folder)
    assert len(runs_in(cfg.paths.mlflow_uri, "medqa_rewriter")) == 1
