"""`benchmarks/vs_trl.py`'s phases of a step, on both sides: the medians and the rest of the
step outside them (`vs_trl_common.phase_seconds`), and TRL's phases timed around what its
trainer calls (`vs_trl_trl.PhaseClock`)."""

from __future__ import annotations

import sys
from types import SimpleNamespace

import pytest

from src.utils.resolvers import PROJECT_ROOT

sys.path.insert(0, str(PROJECT_ROOT / "benchmarks"))
from vs_trl_common import phase_seconds, step_seconds  # noqa: E402
from vs_trl_trl import PhaseClock  # noqa: E402


def test_step_seconds_are_the_times_between_step_ends() -> None:
    assert step_seconds([10.0, 11.0, 13.5]) == [1.0, 2.5]
    assert step_seconds([10.0]) == []


def test_phase_medians_and_the_rest_of_each_step() -> None:
    medians = phase_seconds(
        [1.0, 2.0, 3.0], {"sampling": [0.5, 1.0, 1.0], "update": [0.2, 0.2, 0.5]}
    )
    # rest per step: 0.3, 0.8, 1.5
    assert medians == {"sampling": 1.0, "update": 0.2, "rest": 0.8}


def test_no_rest_where_a_phase_misses_a_step() -> None:
    medians = phase_seconds([1.0, 2.0], {"sampling": [0.5], "update": [0.2, 0.4]})
    assert medians == {"sampling": 0.5, "update": pytest.approx(0.3)}
    assert phase_seconds([1.0], {"sampling": []}) == {}


def test_spans_count_in_the_step_they_start_in() -> None:
    clock = PhaseClock()
    clock.spans = [
        ("sampling", 0.5, 0.9),  # before the first step's end: the untimed first step
        ("sampling", 1.1, 1.5),
        ("log_probs", 1.5, 1.6),
        ("log_probs", 1.7, 1.8),  # two forwards in one step add up
        ("backward", 1.8, 2.1),  # starts by the end of step 2, ends after it
        ("sampling", 2.2, 2.6),
    ]
    per_step = clock.per_step([1.0, 2.0, 3.0])
    assert per_step["sampling"] == pytest.approx([0.4, 0.4])
    assert per_step["log_probs"] == pytest.approx([0.2, 0.0])
    assert per_step["backward"] == pytest.approx([0.3, 0.0])
    assert per_step["reward"] == [0, 0]


def fake_trainer() -> SimpleNamespace:
    return SimpleNamespace(
        model=SimpleNamespace(generate=lambda ids: ids + 1),
        _get_per_token_logps_and_entropies=lambda model, ids: ids * 2,
        accelerator=SimpleNamespace(backward=lambda loss: None),
    )


def test_attached_calls_keep_their_results_and_leave_spans() -> None:
    trainer, clock = fake_trainer(), PhaseClock()
    assert clock.attach(trainer)
    reward = clock.timed("reward", lambda prompts, completions: [1.0])
    assert trainer.model.generate(3) == 4
    assert trainer._get_per_token_logps_and_entropies(None, 3) == 6
    assert trainer.accelerator.backward(0.0) is None
    assert reward(["p"], ["c"]) == [1.0]
    assert [name for name, _, _ in clock.spans] == ["sampling", "log_probs", "backward", "reward"]
    assert all(start <= end for _, start, end in clock.spans)


def test_a_release_without_the_forwards_is_not_timed() -> None:
    trainer = fake_trainer()
    del trainer._get_per_token_logps_and_entropies
    generate = trainer.model.generate
    assert not PhaseClock().attach(trainer)
    assert trainer.model.generate is generate


def test_a_failing_call_still_leaves_its_span() -> None:
    clock = PhaseClock()

    def fails() -> None:
        raise RuntimeError("out of memory")

    with pytest.raises(RuntimeError):
        clock.timed("backward", fails)()
    assert [name for name, _, _ in clock.spans] == ["backward"]
