"""DAPO's overlong penalty: hand-computed scores, its place among other rewards, its config."""

from __future__ import annotations

import pytest
from omegaconf import OmegaConf

from src.reward.accuracy import AnswerAccuracy
from src.reward.combine import CombinedReward
from src.reward.overlong import OverlongPenalty
from src.utils.compose import compose_train_config
from src.utils.errors import ConfigError
from tests.helpers.declared import refusal


def test_the_penalty_grows_linearly_over_the_buffer() -> None:
    # max 8, buffer 4: 0 up to 4 tokens, then -0.25 per token down to -1 (x penalty 0.5)
    penalty = OverlongPenalty(max_length=8, buffer=4, penalty=0.5)
    scores = penalty.score_lengths([1, 4, 5, 6, 8, 9])
    assert scores == pytest.approx([0.0, 0.0, -0.125, -0.25, -0.5, -0.5])


def test_bad_settings_name_the_key() -> None:
    assert refusal({"reward.functions.overlong.buffer": 0}).startswith(
        "reward.functions.overlong.buffer must be a whole number >= 1"
    )
    with pytest.raises(ConfigError, match=r"overlong.buffer must be at most max_length \(8\)"):
        OverlongPenalty(max_length=8, buffer=9)
    assert refusal({"reward.functions.overlong.penalty": -1.0}).startswith(
        "reward.functions.overlong.penalty must be a number >= 0"
    )


def test_it_adds_to_the_task_reward_from_the_sampled_lengths() -> None:
    reward = CombinedReward(
        {"accuracy": AnswerAccuracy(), "overlong": OverlongPenalty(8, 2)},
        {"accuracy": 1.0, "overlong": 1.0},
    )
    rows = [{"answer": "12"}] * 3
    scores = reward(["12", "12", "13"], rows, [3, 8, 7])
    assert scores.total.tolist() == pytest.approx([1.0, 0.0, -0.5])
    assert scores.parts["overlong"].tolist() == pytest.approx([0.0, -1.0, -0.5])
    with pytest.raises(ValueError, match="scores token counts"):
        reward(["12"], rows[:1])


def test_the_preset_composes_with_a_tasks_reward() -> None:
    cfg = compose_train_config(["reward=[accuracy,overlong]", "paths.run_dir=unused"])
    reward = OmegaConf.to_container(cfg.reward, resolve=True)
    assert set(reward["functions"]) == {"accuracy", "overlong"}
    assert reward["weights"] == {"accuracy": 1.0, "overlong": 1.0}
    overlong = reward["functions"]["overlong"]
    assert (overlong["max_length"], overlong["buffer"]) == (8, 2)  # arithmetic: 8 tokens
