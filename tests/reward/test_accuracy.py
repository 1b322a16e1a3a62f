"""Answer extraction and the combination of reward functions."""

import math

import pytest
import torch

from src.reward.accuracy import AnswerAccuracy, extract_final_number
from src.reward.combine import CombinedReward


@pytest.mark.parametrize(
    ("text", "number"),
    [
        (" 85", "85"),
        ("37 + 48 = 85.", "85"),
        ("-12", "-12"),
        ("1,234", "1234"),
        ("2.50", "2.5"),
        ("none", None),
    ],
)
def test_extract_final_number(text, number):
    assert extract_final_number(text) == number


def test_accuracy_compares_final_numbers_and_falls_back_to_text():
    accuracy = AnswerAccuracy()
    rows = [
        {"answer": "85"},
        {"answer": "85"},
        {"answer": "85"},
        {"answer": "Paris"},
        {"answer": "3.50"},
    ]
    outcomes = [" 85", "it is 84", "", " paris ", "3.5"]
    assert accuracy(outcomes, rows) == [1.0, 0.0, 0.0, 1.0, 1.0]


def test_combined_reward_weights_and_keeps_parts():
    combined = CombinedReward(
        {
            "one": lambda outs, rows: [1.0] * len(outs),
            "len": lambda outs, rows: [len(o) for o in outs],
        },
        weights={"len": 0.5},
    )
    total, parts = combined(["ab", "abcd"], [{}, {}])
    assert total.tolist() == [2.0, 3.0]
    assert parts["len"].tolist() == [2.0, 4.0] and parts["one"].dtype == torch.float32


def test_combined_reward_rejects_bad_functions():
    with pytest.raises(ValueError, match="empty"):
        CombinedReward({})
    with pytest.raises(ValueError, match=r"\['typo'\]"):
        CombinedReward({"a": lambda o, r: [0.0] * len(o)}, weights={"typo": 1.0})
    short = CombinedReward({"short": lambda o, r: [0.0]})
    with pytest.raises(ValueError, match="'short' returned 1 scores for 2"):
        short(["a", "b"], [{}, {}])
    nan = CombinedReward({"nan": lambda o, r: [math.nan] * len(o)})
    with pytest.raises(ValueError, match="'nan' returned non-finite"):
        nan(["a"], [{}])
