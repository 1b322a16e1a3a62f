"""`eval/<function>_room_closed`: the share of the room from the greedy score at step 0 to the
score of the rows' own answers that training has closed (src/recipes/char_diffusion/room.py)."""

from __future__ import annotations

import math
from types import SimpleNamespace

import pytest

from src.recipes.char_diffusion.infill import Infill
from src.recipes.char_diffusion.room import RoomClosed, gold_score, room_closed
from src.reward.combine import CombinedReward


def test_the_share_of_the_room_closed() -> None:
    assert room_closed(0.4, 0.4, 0.8) == 0.0
    assert room_closed(0.5, 0.4, 0.8) == pytest.approx(0.25)
    assert room_closed(0.3, 0.4, 0.8) == pytest.approx(-0.25)  # the score fell
    assert math.isnan(room_closed(0.9, 0.8, 0.8))  # no room to close


def test_the_gold_score_is_the_rewards_score_of_the_real_windows() -> None:
    """An infill row's answer is its masked characters: read as a fill, it is the real window,
    and only that is what the reward function sees."""
    seen: list[str] = []

    def judge(texts, rows=None):
        seen.extend(texts)
        return [1.0 if text == "the cat sat" else 0.5 for text in texts]

    rows = [
        {"masked": "the c\u2588t s\u2588t", "answer": "aa"},
        {"masked": "\u2588he cat sat", "answer": "x"},
    ]
    module = SimpleNamespace(policy=Infill(), reward=CombinedReward({"judge": judge}), lm=None)
    assert gold_score(module, rows, "judge") == pytest.approx(0.75)
    assert seen == ["the cat sat", "xhe cat sat"]


def test_the_start_and_gold_survive_a_checkpoint() -> None:
    callback = RoomClosed("judge")
    callback.start, callback.gold = 0.4, 0.8
    restored = RoomClosed("judge")
    restored.load_state_dict(callback.state_dict())
    assert (restored.start, restored.gold) == (0.4, 0.8)
