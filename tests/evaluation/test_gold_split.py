"""The eval's split of accuracy by whether the answerer read the gold answer, and the share of
the most frequent answer position: hand-computed on records as `score_head` writes them."""

from __future__ import annotations

import pytest

from src.evaluation.scoring import answer_positions, gold_split


def records(pairs, key="gold_retrieved", outcomes=None):
    outcomes = outcomes or ["A"] * len(pairs)
    return [
        {key: found, "accuracy": score, "outcome": outcome}
        for (found, score), outcome in zip(pairs, outcomes, strict=True)
    ]


def test_accuracy_is_split_by_gold_read_with_the_gap():
    rows = records([(True, 1.0), (True, 0.0), (True, 1.0), (False, 0.0), (False, 1.0)])
    split = gold_split(rows)
    assert split["accuracy/gold_read"] == pytest.approx(2 / 3)
    assert split["accuracy/gold_unread"] == pytest.approx(1 / 2)
    assert split["accuracy/gold_gap"] == pytest.approx(2 / 3 - 1 / 2)


def test_the_searchers_detail_splits_too_and_a_missing_side_has_no_gap():
    rows = records([(1.0, 1.0), (1.0, 0.0)], key="gold_in_information")
    assert gold_split(rows) == {"accuracy/gold_read": 0.5}


def test_records_without_the_detail_or_the_score_give_nothing():
    assert gold_split([{"accuracy": 1.0}]) == {}
    assert gold_split([{"gold_retrieved": True}]) == {}
    assert gold_split([]) == {}


def test_the_largest_answer_position_share():
    rows = records([(True, 1.0)] * 5, outcomes=["D", "D", "A", "", "D"])
    assert answer_positions(rows) == {"largest_position_share": pytest.approx(3 / 5)}
    texts = records([(True, 1.0)] * 2, outcomes=["AB", "the answer"])
    assert answer_positions(texts) == {}  # not option letters: nothing to count
