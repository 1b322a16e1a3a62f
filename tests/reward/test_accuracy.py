"""Answer extraction and the combination of reward functions."""

import logging
import math

import pytest
import torch

from src.data.answers import extract_final_answer, normalize_number
from src.reward.accuracy import AnswerAccuracy, extract_final_number
from src.reward.combine import CombinedReward, RewardError
from tests.helpers.declared import refusal


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


def test_extract_final_number_keeps_its_arithmetic_task_behaviour():
    assert extract_final_number("The answer is 85") == "85"
    assert extract_final_number("1,234.50") == "1234.5"


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("1000", 1000.0),
        ("1,000", 1000.0),
        ("1,234,567.5", 1234567.5),
        ("$5", 5.0),
        ("€3.50", 3.5),
        ("£10", 10.0),
        ("-$5", -5.0),
        ("5.0", 5.0),
        ("3/4", 0.75),
        (r"\frac{3}{4}", 0.75),
        (r"\dfrac{3}{4}", 0.75),
        (r"$-\frac{1}{2}$", -0.5),
        ("0.75", 0.75),
        ("42.", 42.0),
        ("7,", 7.0),
        ("= 9", 9.0),
        ("+4", 4.0),
        ("18 dollars", 18.0),
        ("5 cm", 5.0),
        ("12 apples.", 12.0),
        ("12%", 12.0),
        (r"\boxed{8}", 8.0),
        ("-3", -3.0),
        ("1,2", None),
        ("5 + 3", None),
        ("3/0", None),
        ("f(x)=0", None),
        ("The sequence does not exist", None),
        ("", None),
    ],
)
def test_normalize_number(text, value):
    assert normalize_number(text) == value


@pytest.mark.parametrize(
    ("text", "answer"),
    [
        ("First 3 + 4 = 7, then 7 * 2 = 14.\n#### 14", "14"),
        ("#### 1,000\nThen 20 more questions follow with 5 answers.", "1,000"),
        (r"So the share is \boxed{\frac{3}{4}}, since 4 parts make 1", r"\frac{3}{4}"),
        (r"We get \boxed{a^{2}} for n = 2", "a^{2}"),
        ("The answer is 7. Check: 7 + 3 = 10", "7"),
        ("Final Answer: **12**", "12"),
        ("the final answer is $18.00.", "$18.00"),
        ("Answer:\n42", "42"),
        ("She eats 3/4 of the 8 slices, so 3/4", "3/4"),
        ("10 - 3 = 7", "7"),
        ("It drops to -3", "-3"),
        ("no numbers here", None),
    ],
)
def test_extract_final_answer_precedence(text, answer):
    assert extract_final_answer(text) == answer


@pytest.mark.parametrize(
    ("completion", "gold", "score"),
    [
        ("She has 1000 in total.", "1,000", 1.0),
        ("#### 1,000", "1000", 1.0),
        ("Each costs 5 dollars, so the answer is $5.", "$5", 1.0),
        ("The answer is 5", "5.0", 1.0),
        ("So the answer is 0.75.", "3/4", 1.0),
        (r"Therefore \boxed{\frac{3}{4}}", "0.75", 1.0),
        ("The answer is 42.", "42.", 1.0),
        ("The answer is 18.", "18 dollars", 1.0),
        ("The answer is 5 cm.", "5", 1.0),
        ("The discount is 12%.", "12%", 1.0),
        ("The temperature falls to -3", "-3", 1.0),
        ("The answer is 3", "-3", 0.0),
        ("The answer is 12", "1,2", 0.0),
        ("Earlier 3 and 9, then #### 12", "12", 1.0),
        (r"Got \boxed{12}, then added 5 + 1 = 6", "12", 1.0),
        ("The answer is 7. Check: 7 + 3 = 10", "7", 1.0),
        ("The answer is 7. Check: 7 + 3 = 10", "10", 0.0),
        ("5", "50", 0.0),
        ("The answer is 0.7", "3/4", 0.0),
        ("I cannot tell.", "8", 0.0),
        ("The answer is f(x)=0.", "f(x)=0", 1.0),
        (r"\boxed{f(x)=0}", "f(x)=0", 1.0),
        ("The answer is f(x)=1.", "f(x)=0", 0.0),
        ("  the sequence  does not exist. ", "The sequence does not exist", 1.0),
    ],
)
def test_accuracy_on_gsm8k_style_answers(completion, gold, score):
    assert AnswerAccuracy()([completion], [{"answer": gold}]) == [score]


def test_accuracy_names_the_fields_it_requires():
    assert AnswerAccuracy().required_fields == ("answer",)
    assert AnswerAccuracy(answer_field="final").required_fields == ("final",)


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
    assert "reward.on_error must be one of" in refusal({"reward.on_error": "ignore"})


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
