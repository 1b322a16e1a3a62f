"""Answer extraction and the combination of reward functions."""

import logging
import math

import pytest
import torch

from src.reward.accuracy import AnswerAccuracy, extract_final_number
from src.reward.combine import CombinedReward, RewardError


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
    total, parts, errors = combined(["ab", "abcd"], [{}, {}])
    assert total.tolist() == [2.0, 3.0]
    assert parts["len"].tolist() == [2.0, 4.0] and parts["one"].dtype == torch.float32
    assert errors == {"one": 0, "len": 0}


def test_combined_reward_rejects_bad_functions():
    with pytest.raises(ValueError, match="empty"):
        CombinedReward({})
    with pytest.raises(ValueError, match=r"\['typo'\]"):
        CombinedReward({"a": lambda o, r: [0.0] * len(o)}, weights={"typo": 1.0})
    short = CombinedReward({"short": lambda o, r: [0.0]})
    with pytest.raises(ValueError, match="'short' returned 1 scores for 2"):
        short(["a", "b"], [{}, {}])
    nan = CombinedReward({"nan": lambda o, r: [math.nan] * len(o)})
    with pytest.raises(RewardError, match="'nan' returned nan for the outcome 'a'"):
        nan(["a"], [{}])
    with pytest.raises(ValueError, match="reward.on_error must be one of"):
        CombinedReward({"a": lambda o, r: [0.0] * len(o)}, on_error="ignore")


def fragile(outcomes, rows):
    """Raises on any outcome containing 'boom', returns NaN for 'nan', None for 'none'."""
    if any("boom" in outcome for outcome in outcomes):
        raise KeyError("boom")
    return [{"nan": math.nan, "none": None}.get(outcome, 1.0) for outcome in outcomes]


def test_a_raising_reward_stops_the_run_by_default_naming_the_function():
    combined = CombinedReward({"fragile": fragile})
    with pytest.raises(RewardError, match="'fragile' raised KeyError: 'boom'.*on_error=zero"):
        combined(["ok", "boom"], [{}, {}])
    with pytest.raises(RewardError, match="'fragile' returned None for the outcome 'none'"):
        combined(["ok", "none"], [{}, {}])


def test_on_error_zero_scores_only_the_failing_outcomes_and_counts_them(caplog):
    combined = CombinedReward(
        {"fragile": fragile, "one": lambda o, r: [1.0] * len(o)}, on_error="zero"
    )
    outcomes = ["ok", "boom", "nan", "none", "fine"]
    with caplog.at_level(logging.WARNING):
        total, parts, errors = combined(outcomes, [{}] * 5)
        combined(outcomes, [{}] * 5)
    # The batch call raised, so each outcome was scored alone: only 'boom' raised.
    assert parts["fragile"].tolist() == [1.0, 0.0, 0.0, 0.0, 1.0]
    assert total.tolist() == [2.0, 1.0, 1.0, 1.0, 2.0]
    assert errors == {"fragile": 3, "one": 0}
    assert caplog.text.count("reward function 'fragile' failed on 3 of 5 outcomes") == 1
