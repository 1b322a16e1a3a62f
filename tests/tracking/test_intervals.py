"""Aggregates over seeds on hand-made tables: a known IQM, intervals that hold the truth as
often as they claim, and the probability of improvement on constructed cases."""

from __future__ import annotations

import math

import numpy as np
import pytest

from src.tracking.intervals import (
    by_task,
    estimates,
    interval,
    iqm,
    mean,
    performance_profile,
    probability_of_improvement,
)


def test_iqm_is_the_mean_of_the_middle_half() -> None:
    # eight scores: a quarter (two) cut from each end leaves 3, 4, 5, 6
    scores = np.array([100.0, 1.0, 3.0, 4.0, 5.0, 6.0, 8.0, -50.0])
    assert float(iqm(scores)) == pytest.approx(4.5)
    assert interval(scores, iqm).point == pytest.approx(4.5)  # one diverged seed barely moves it
    assert interval(scores, mean).point == pytest.approx(77 / 8)


def test_scores_are_read_per_task() -> None:
    assert [list(t) for t in by_task([0.1, 0.2])] == [[0.1, 0.2]]
    assert [list(t) for t in by_task(np.array([[1.0, 2.0], [3.0, 4.0]]))] == [[1, 3], [2, 4]]
    ragged = by_task([np.array([1.0, 2.0, 3.0]), np.array([4.0])])
    assert [t.size for t in ragged] == [3, 1]
    with pytest.raises(ValueError, match="NaN"):
        by_task([0.1, float("nan")])
    with pytest.raises(ValueError, match="at least one run"):
        by_task([])


def test_the_interval_holds_the_point_and_narrows_with_more_seeds() -> None:
    draws = np.random.default_rng(1)
    few = interval(draws.normal(0.5, 0.1, 5), mean)
    many = interval(draws.normal(0.5, 0.1, 50), mean)
    for found in (few, many):
        assert found.low <= found.point <= found.high
    assert many.high - many.low < few.high - few.low


def test_the_interval_contains_the_truth_about_95_times_in_100() -> None:
    draws = np.random.default_rng(0)
    covered = 0
    for repeat in range(200):  # 200 studies of 20 seeds whose true mean is 0.5
        found = interval(draws.normal(0.5, 0.1, 20), mean, reps=500, seed=repeat)
        covered += found.low <= 0.5 <= found.high
    assert 0.88 <= covered / 200 <= 0.99


def test_the_stratified_interval_keeps_tasks_apart() -> None:
    # two tasks at very different levels: every resample holds two runs of each, so the
    # mean never leaves the range the tasks' own runs allow
    tasks = [np.array([0.0, 0.1]), np.array([10.0, 10.1])]
    found = interval(tasks, mean, reps=500)
    assert found.point == pytest.approx(5.05)
    assert 5.0 <= found.low <= found.high <= 5.1


def test_one_run_gives_the_point_and_no_interval() -> None:
    found = interval([0.4], iqm)
    assert found.point == pytest.approx(0.4) and math.isnan(found.low) and math.isnan(found.high)
    assert "no interval" in str(found)


def test_probability_of_improvement_on_constructed_cases() -> None:
    better, worse = np.array([0.8, 0.9, 0.85, 0.95]), np.array([0.1, 0.2, 0.15, 0.05])
    certain = probability_of_improvement(better, worse)
    assert certain.point == 1.0 and certain.low == 1.0 and certain.high == 1.0
    assert probability_of_improvement(worse, better).point == 0.0
    same = probability_of_improvement(better, better.copy())
    assert same.point == pytest.approx(0.5)  # ties count half
    assert same.low < 0.5 < same.high
    # by hand: 0.5 beats 0.4 and ties 0.5; 0.3 beats neither: (1 + 0.5 + 0 + 0) / 4
    assert probability_of_improvement([0.5, 0.3], [0.4, 0.5]).point == pytest.approx(0.375)


def test_probability_of_improvement_averages_over_tasks() -> None:
    x = [np.array([1.0, 1.0]), np.array([0.0, 0.0])]
    y = [np.array([0.0, 0.0]), np.array([0.5, 0.5])]
    assert probability_of_improvement(x, y).point == pytest.approx(0.5)  # wins one, loses one
    with pytest.raises(ValueError, match="same tasks"):
        probability_of_improvement(x, [np.array([0.0, 0.0])])


def test_performance_profile_counts_scores_above_each_threshold() -> None:
    profile = performance_profile([0.2, 0.4, 0.6, 0.8], [0.0, 0.5, 0.9], reps=200)
    assert [p.point for p in profile] == [1.0, 0.5, 0.0]


def test_estimates_of_each_configuration() -> None:
    found = estimates({"grpo": [0.5, 0.6, 0.7], "dapo": [0.7, 0.8, 0.9]}, reps=200)
    assert set(found) == {"grpo", "dapo"} and set(found["grpo"]) == {"IQM", "mean"}
    assert found["dapo"]["mean"].point == pytest.approx(0.8)
