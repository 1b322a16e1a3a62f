"""Phases are charged their own time only, and timing outside a timer records nothing."""

import itertools

import pytest

from src.utils import timing
from src.utils.timing import phase, phase_timer


@pytest.fixture
def clock(monkeypatch):
    """A clock that advances one second per reading."""
    ticks = itertools.count()
    monkeypatch.setattr(timing.time, "perf_counter", lambda: float(next(ticks)))


def test_nested_phases_are_charged_exclusively(clock):
    with phase_timer() as timer:
        with phase("outcomes"):  # reads 0 ... 5
            with phase("retrieval"):  # reads 1, 2
                pass
            with phase("frozen_generation"):  # reads 3, 4
                pass
        with phase("retrieval"):  # reads 6, 7
            pass
    assert timer.seconds == {"retrieval": 2.0, "frozen_generation": 1.0, "outcomes": 3.0}
    assert timer.metrics()["timing/retrieval"] == 2.0


def test_phase_outside_a_timer_records_nothing(clock):
    with phase("sampling"):
        pass
    with phase_timer() as timer:
        pass
    assert timer.seconds == {}


def test_a_phase_that_raises_is_still_charged(clock):
    with phase_timer() as timer, pytest.raises(ValueError), phase("reward"):
        raise ValueError("boom")
    assert timer.seconds == {"reward": 1.0}
