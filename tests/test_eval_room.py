"""`python -m src.eval`'s room closed: each head's sampled pass@1 against the base head's room."""

from __future__ import annotations

import math

import pytest

from src.eval import room_closed_against_base


def test_room_closed_against_the_base_head() -> None:
    summaries = {
        "base": {"room/pass_at_1": 0.2, "room/room": 0.2},
        "sft": {"room/pass_at_1": 0.3, "room/room": 0.1},
        "grpo": {"room/pass_at_1": 0.1, "room/room": 0.0},
        "greedy_only": {"accuracy": 0.5},
    }
    closed = room_closed_against_base(summaries)
    assert closed == {"sft": pytest.approx(0.5), "grpo": pytest.approx(-0.5)}


def test_no_base_head_or_no_room_gives_no_or_nan_share() -> None:
    assert room_closed_against_base({"sft": {"room/pass_at_1": 0.3, "room/room": 0.1}}) == {}
    closed = room_closed_against_base(
        {"base": {"room/pass_at_1": 0.2, "room/room": 0.0}, "grpo": {"room/pass_at_1": 0.4}}
    )
    assert math.isnan(closed["grpo"])
