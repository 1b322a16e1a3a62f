"""`python -m src.eval`'s room closed: each head's sampled pass@1 against the base head's room,
with its margin from the same rows' changes."""

from __future__ import annotations

import math

import pytest

from src.eval import room_closed_against_base

CLOSED = "room/room_closed"


def test_room_closed_against_the_base_head() -> None:
    summaries = {
        "base": {"room/pass_at_1": 0.2, "room/room": 0.2},
        "sft": {"room/pass_at_1": 0.3, "room/room": 0.1},
        "grpo": {"room/pass_at_1": 0.1, "room/room": 0.0},
        "greedy_only": {"accuracy": 0.5},
    }
    closed = room_closed_against_base(summaries, {})
    assert closed == {"sft": {CLOSED: pytest.approx(0.5)}, "grpo": {CLOSED: pytest.approx(-0.5)}}


def test_the_margin_pairs_each_row_with_the_base_heads() -> None:
    summaries = {"base": {"room/pass_at_1": 0.2, "room/room": 0.2}, "grpo": {"room/pass_at_1": 0.4}}
    # rows 0.1 -> 0.3 and 0.3 -> 0.5: every row rose by 0.2, so the change has no spread
    closed = room_closed_against_base(summaries, {"base": [0.1, 0.3], "grpo": [0.3, 0.5]})
    assert closed["grpo"][CLOSED] == pytest.approx(1.0)
    assert closed["grpo"]["room/room_closed_margin"] == pytest.approx(0.0, abs=1e-9)
    # changes 0 and 0.4: margin 1.96 * 0.2 over the room 0.2
    closed = room_closed_against_base(summaries, {"base": [0.1, 0.3], "grpo": [0.1, 0.7]})
    assert closed["grpo"]["room/room_closed_margin"] == pytest.approx(1.96)


def test_no_base_head_or_no_room_gives_no_or_nan_share() -> None:
    assert room_closed_against_base({"sft": {"room/pass_at_1": 0.3, "room/room": 0.1}}, {}) == {}
    closed = room_closed_against_base(
        {"base": {"room/pass_at_1": 0.2, "room/room": 0.0}, "grpo": {"room/pass_at_1": 0.4}}, {}
    )
    assert math.isnan(closed["grpo"][CLOSED])
