"""The room's estimators on hand-computed cases: pass@k (Chen et al.'s unbiased estimator),
maj@k with ties and unanswered samples, the room and the room closed, the form's part."""

from __future__ import annotations

import math

import pytest
import torch

from src.evaluation.room import (
    Group,
    majority_success,
    margin,
    pass_at_k,
    room_closed,
    room_closed_margin,
    split_figures,
    verdict,
)


@pytest.mark.parametrize(
    ("n", "c", "k", "expected"),
    [
        (4, 1, 1, 0.25),  # k = 1: the success rate
        (4, 1, 4, 1.0),  # k = n: some sample succeeded
        (4, 0, 4, 0.0),  # all wrong
        (4, 4, 1, 1.0),  # all right
        (4, 2, 2, 1 - 1 / 6),  # C(2,2)/C(4,2) = 1/6 of the pairs hold no success
        (5, 1, 3, 1 - (4 * 3 * 2) / (5 * 4 * 3)),  # 1 - C(4,3)/C(5,3) = 0.6
        (16, 3, 16, 1.0),
    ],
)
def test_pass_at_k_by_hand(n: int, c: int, k: int, expected: float) -> None:
    assert pass_at_k(n, c, k) == pytest.approx(expected)


def test_pass_at_k_matches_the_binomial_formula() -> None:
    for n, c, k in [(16, 5, 4), (20, 2, 10), (8, 7, 3)]:
        assert pass_at_k(n, c, k) == pytest.approx(1 - math.comb(n - c, k) / math.comb(n, k))


@pytest.mark.parametrize(("n", "c", "k"), [(4, 5, 1), (4, 1, 5), (4, 1, 0), (4, -1, 1)])
def test_pass_at_k_refuses_impossible_counts(n: int, c: int, k: int) -> None:
    with pytest.raises(ValueError):
        pass_at_k(n, c, k)


def test_majority_of_the_answers() -> None:
    assert majority_success(["A", "A", "B", "C"], [1, 1, 0, 0]) == 1.0  # the majority is right
    assert majority_success(["A", "B", "B", "C"], [1, 0, 0, 0]) == 0.0  # the majority is wrong
    assert majority_success(["A"], [1]) == 1.0  # k = 1: the one answer
    assert majority_success(["B", "B"], [0, 0]) == 0.0  # all wrong
    assert majority_success(["A", "A"], [1, 1]) == 1.0  # all right


def test_majority_ties_are_shared_and_unanswered_samples_do_not_vote() -> None:
    assert majority_success(["A", "A", "B", "B"], [1, 1, 0, 0]) == 0.5  # a two-way tie
    assert majority_success(["A", "B", "C", None], [1, 0, 0, 0]) == pytest.approx(1 / 3)
    assert majority_success([None, None, "A"], [0, 0, 1]) == 1.0  # one answer outvotes none
    assert majority_success([None, None], [0, 0]) == 0.0  # nobody answered


def test_room_closed() -> None:
    assert room_closed(after=0.30, before=0.10, room=0.40) == pytest.approx(0.5)
    assert room_closed(after=0.05, before=0.10, room=0.40) == pytest.approx(-0.125)
    assert math.isnan(room_closed(after=0.3, before=0.3, room=0.0))


def test_margin_by_hand() -> None:
    # values 0, 1, 2: sample sd 1, so 1.96 / sqrt(3)
    assert margin([0.0, 1.0, 2.0]) == pytest.approx(1.96 / math.sqrt(3))
    assert margin([0.3] * 10) == pytest.approx(0.0, abs=1e-12)  # every prompt alike
    assert math.isnan(margin([0.5]))  # one prompt: no interval


def test_margin_covers_the_true_mean_about_95_times_in_100() -> None:
    draws = torch.Generator().manual_seed(0)
    covered = 0
    for _ in range(400):  # 400 samples of 50 prompts, each a success rate of 8 coin flips at 0.3
        rates = (torch.rand(50, 8, generator=draws) < 0.3).float().mean(dim=1).tolist()
        covered += abs(sum(rates) / 50 - 0.3) <= margin(rates)
    assert 0.91 <= covered / 400 <= 0.98


def test_room_closed_margin_pairs_the_prompts() -> None:
    # every prompt rose by 0.2: the change has no spread, whatever the prompts' own levels
    assert room_closed_margin([0.3, 0.9, 0.5], [0.1, 0.7, 0.3], 0.4) == pytest.approx(0, abs=1e-9)
    # changes 0 and 0.4: sample sd 0.2 * sqrt(2), margin 1.96 * 0.2, over the room 0.4
    assert room_closed_margin([0.1, 0.5], [0.1, 0.1], room=0.4) == pytest.approx(0.98)
    assert math.isnan(room_closed_margin([0.1, 0.5], [0.1, 0.1], room=0.0))
    with pytest.raises(ValueError, match="2 prompts after training against 1 before"):
        room_closed_margin([0.1, 0.5], [0.1], room=0.4)


def groups_table() -> list[Group]:
    """Two prompts, four samples each, with answers and a form (by hand below)."""
    return [
        Group(  # right twice (A), wrong once (B), one unformed sample
            rewards=[1.5, 1.5, 0.5, 0.0],
            successes=[1, 1, 0, 0],
            answers=["A", "A", "B", None],
            well_formed=[True, True, True, False],
            parts={"accuracy": [1, 1, 0, 0]},
            clipped=[False, False, False, True],
            texts=["a", "a", "b", "x"],
            chance=0.25,
        ),
        Group(  # never right; the majority (C) is wrong
            rewards=[0.5, 0.5, 0.5, 0.5],
            successes=[0, 0, 0, 0],
            answers=["C", "C", "D", None],
            well_formed=[True, False, True, False],
            parts={"accuracy": [0, 0, 0, 0]},
            clipped=[False, False, False, False],
            texts=["c", "c2", "d", "y"],
            chance=0.25,
        ),
    ]


def test_split_figures_by_hand() -> None:
    f = split_figures(groups_table())
    assert f["pass_at_1"] == pytest.approx((0.5 + 0.0) / 2)
    assert f["pass_at_k"] == pytest.approx((1.0 + 0.0) / 2)
    assert f["maj_at_k"] == pytest.approx((1.0 + 0.0) / 2)
    assert f["room"] == pytest.approx(0.5 - 0.25)
    # per prompt pass@1 0.5 and 0, room 0.5 and 0: sample sd 0.5 / sqrt(2), over sqrt(2)
    assert f["pass_at_1_margin"] == pytest.approx(1.96 * 0.25)
    assert f["room_margin"] == pytest.approx(1.96 * 0.25)
    assert f["learnability"] == pytest.approx((0.25 + 0.0) / 2)
    assert f["signal"] == 0.5  # the second group's rewards tie
    assert f["best_of_k"] == pytest.approx((1.5 + 0.5) / 2)
    assert f["well_formed"] == pytest.approx((0.75 + 0.5) / 2)
    # per prompt among the well-formed: 2 of 3 right, 0 of 2 right
    assert f["right_among_well_formed"] == pytest.approx((2 / 3 + 0) / 2)
    # the second group's well-formed vote C and D tie, both wrong
    assert f["maj_at_k_well_formed"] == pytest.approx((1.0 + 0.0) / 2)
    assert f["answer_room"] == pytest.approx(0.5 - 1 / 3)
    assert f["form_room"] == pytest.approx(1 / 3 - 0.25)
    assert f["truncated"] == pytest.approx(1 / 8)
    assert f["distinct"] == pytest.approx((3 / 4 + 4 / 4) / 2)
    assert f["chance"] == 0.25
    assert f["well_formed_samples"] == 5
    assert f["accuracy/group_std"] == pytest.approx((0.5 + 0.0) / 2)


def test_a_graded_reward_has_best_of_k_room() -> None:
    f = split_figures([Group(rewards=[0.2, 0.6]), Group(rewards=[0.4, 0.4])])
    assert f["pass_at_1"] == pytest.approx(0.4)
    assert f["room"] == pytest.approx((0.6 + 0.4) / 2 - 0.4)
    assert f["learnability"] == pytest.approx((0.04 + 0.0) / 2)
    assert "maj_at_k" not in f and "pass_at_k" not in f
    # rooms per prompt 0.2 and 0 (best of k less the mean): sample sd 0.1 * sqrt(2)
    assert f["room_margin"] == pytest.approx(1.96 * 0.1)


def test_groups_of_unequal_size_are_refused() -> None:
    with pytest.raises(ValueError, match="same number"):
        split_figures([Group(rewards=[1.0]), Group(rewards=[1.0, 0.0])])


def test_verdicts() -> None:
    never = split_figures([Group(rewards=[0.0] * 4, successes=[0] * 4, answers=["B"] * 4)])
    assert verdict(never, "validation").startswith("no room: the policy never succeeds in 4")
    alike = split_figures([Group(rewards=[1.0] * 4, successes=[1] * 4, answers=["A"] * 4)])
    assert verdict(alike, "train").startswith("no signal")
    line = verdict(split_figures(groups_table()), "validation")
    assert line.startswith("signal in 50% of groups, room 0.25 +-0.49 on validation")
    assert "pass@1 0.25 -> maj@4 0.50, pass@4 0.50" in line
    assert "answer room 0.17" in line
    assert "(a guess 0.25, +-0.38 over 5 samples): no better than a guess" in line
