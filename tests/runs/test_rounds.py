"""Adversarial rounds (`rounds.count`): each later round trains a GRPO policy against the judge
before it and continues that judge with every earlier policy replayed; the run's GRPO faces the
last judge; each round is cached, so one more round trains one more."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
from omegaconf import OmegaConf

from src.eval import evaluate
from src.pretraining.folders import stage_checkpoint
from src.runs.hooks import before_grpo_steps
from src.runs.settings import check_settings
from src.train import train
from src.utils.errors import ConfigError
from tests.helpers.char_diffusion import SMALL
from tests.helpers.mlflow_runs import history, runs

ROUNDS = [*SMALL, "rounds.grpo_steps=2"]


@pytest.mark.slow
def test_rounds_train_in_turn_and_one_more_round_trains_only_that_one(make_cfg, tmp_path, caplog):
    cfg = make_cfg(*ROUNDS, "rounds.count=3", tiny=False)
    given = copy.deepcopy(cfg)
    train(cfg)
    run = runs(cfg)[-1]
    folders = {n: Path(run.data.tags[f"round.{n}"]) for n in (2, 3)}
    assert "round.4" not in run.data.tags
    # GRPO faced the last round's judge; each round's judge continued the one before it
    assert run.data.tags["rounds.judge"] == str(folders[3] / "judge")
    assert cfg == given  # the run read its config and wrote nothing into it
    assert stage_checkpoint("judge", cfg) == run.data.tags["stage.judge"]
    second = json.loads((folders[2] / "stage.json").read_text())
    third = json.loads((folders[3] / "stage.json").read_text())
    assert second["judge_trained_against"] == run.data.tags["stage.judge"]
    assert third["judge_trained_against"] == str(folders[2] / "judge")
    assert third["judge"]["steps"] == 2 and "round3_judge/val_accuracy_replay" in third["judge"]
    for name in ("judge", "char_accuracy", "degenerate_spans"):
        assert 0 <= run.data.metrics[f"round3/{name}"] <= 1, name
    assert history(cfg, run, "round2_judge/loss") and history(cfg, run, "round3_judge/loss")
    assert sorted(history(cfg, run, "eval/role/degenerate_spans")) == [0, 2]

    # src.eval scores with the judge GRPO trained against: the pretrained generator's held-out
    # score matches the run's step-0 one
    scored = make_cfg(*ROUNDS, "rounds.count=3", tiny=False)
    scored.eval.adapters = {"round2": str(folders[2] / "policy")}  # a saved char model
    summary = evaluate(scored, heads=["base", "round2"], output_dir=tmp_path / "eval")
    assert runs(scored)[-1].data.tags["rounds.judge"] == str(folders[3] / "judge")
    assert summary["base"]["judge"] == pytest.approx(history(cfg, run, "eval/judge")[0], abs=1e-6)
    assert 0 <= summary["round2"]["judge"] <= 1
    unscored = make_cfg(*ROUNDS, "rounds.count=5", tiny=False)  # round 4 is not trained yet
    evaluate(unscored, heads=["base"], output_dir=tmp_path / "eval5")
    assert "rounds.judge" not in runs(unscored)[-1].data.tags
    assert "so the judge of judge_checkpoint=" in caplog.text

    written = {n: (folder / "stage.json").stat().st_mtime for n, folder in folders.items()}
    more = make_cfg(*ROUNDS, "rounds.count=4", tiny=False)
    train(more)
    again = runs(more)[-1]
    assert {n: Path(again.data.tags[f"round.{n}"]) for n in (2, 3)} == folders
    assert written == {n: (f / "stage.json").stat().st_mtime for n, f in folders.items()}
    assert not history(more, again, "round3_judge/loss")  # loaded, not trained
    assert history(more, again, "round4_judge/loss")
    assert again.data.tags["rounds.judge"] == str(Path(again.data.tags["round.4"]) / "judge")

    # A judge the user gives is the judge: no rounds.
    given = make_cfg(
        *ROUNDS, "rounds.count=3", f"judge_checkpoint={folders[2] / 'judge'}", tiny=False
    )
    train(given)
    assert "round.2" not in runs(given)[-1].data.tags
    assert "rounds.judge" not in runs(given)[-1].data.tags


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("rounds.stage=critic", "rounds.stage='critic' names no stage of this task"),
        ("rounds.replay_temperatures=[]", "rounds.replay_temperatures must be a non-empty list"),
        ("rounds.replay_temperatures=[-1]", "got [-1]"),
        ("rounds.replay_share=1", "rounds.replay_share must be a number in [0, 1), got 1"),
        ("rounds.count=0", "rounds.count must be a whole number >= 1, got 0"),
    ],
)
def test_bad_round_settings_are_refused_before_anything_loads(make_cfg, override, message):
    cfg = make_cfg(*SMALL, "rounds.count=3", override, tiny=False)  # one round reads none
    with pytest.raises(ConfigError) as caught:
        check_settings(cfg)
        before_grpo_steps(cfg)  # the rounds' step, built next (runs/parts.py)
    assert message in str(caught.value) and "\n" not in str(caught.value)


def test_one_round_needs_no_round_settings(make_cfg):
    cfg = make_cfg(*SMALL, "rounds.count=1", "rounds.stage=critic", tiny=False)
    check_settings(cfg)
    before_grpo_steps(cfg)
    assert OmegaConf.select(cfg, "rounds.count") == 1
