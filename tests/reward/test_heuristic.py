"""The heuristic math rewards: good worked answers score high, degenerate ones do not, each rule
holds on hand-made texts, and the config composes."""

from __future__ import annotations

import math

import pytest
from omegaconf import OmegaConf

from src.reward.combine import CombinedReward, Scores
from src.reward.heuristic import (
    ConceptCoverage,
    FormulaUse,
    LengthFit,
    StatedAnswer,
    Structure,
    formulas,
    has_final_answer,
    key_terms,
    length_fit,
    new_formulas,
    prose_share,
)
from src.utils.config import build
from src.utils.resolvers import PROJECT_ROOT

WEIGHTS = {"length": 0.2, "formulas": 0.3, "concepts": 0.3, "structure": 0.2}
REWARDS = {
    "length": LengthFit(),
    "formulas": FormulaUse(),
    "concepts": ConceptCoverage(),
    "structure": Structure(),
}

GSM8K = {
    "question": (
        "Janet's ducks lay 16 eggs per day. She eats three for breakfast every morning and bakes "
        "muffins for her friends every day with four. She sells the remainder at the farmers' "
        "market daily for $2 per fresh duck egg. How much in dollars does she make every day at "
        "the farmers' market?"
    ),
    "reference": (
        "Janet sells 16 - 3 - 4 = <<16-3-4=9>>9 duck eggs a day.\n"
        "She makes 9 * 2 = $<<9*2=18>>18 every day at the farmer's market.\n#### 18"
    ),
    "answer": "18",
}
GSM8K_GOOD = (
    "Janet's ducks lay 16 eggs a day. First, she uses 3 + 4 = 7 eggs for breakfast and muffins.\n"
    "Then she sells the remainder: 16 - 7 = 9 eggs.\n"
    "Each egg sells for $2, so she makes 9 * 2 = $18 every day.\n"
    "The answer is 18."
)

COMPETITION = {
    "question": "What is the sum of the roots of $x^2 - 5x + 6 = 0$?",
    "reference": (
        "By Vieta's formulas, the sum of the roots of $ax^2 + bx + c = 0$ is $-\\frac{b}{a}$. "
        "Here $a = 1$ and $b = -5$, so the sum of the roots is $-\\frac{-5}{1} = 5$. "
        "The answer is $\\boxed{5}$."
    ),
    "answer": "5",
    "concepts": ["Vieta's formulas", "quadratic equation factoring"],
}
COMPETITION_GOOD = (
    "The equation is a quadratic, so we can use Vieta's formulas: for $ax^2 + bx + c = 0$ "
    "the sum of the roots is $-b/a$.\n"
    "Here $a = 1$ and $b = -5$, so the sum is $-(-5)/1 = 5$.\n"
    "Checking by factoring: $x^2 - 5x + 6 = (x - 2)(x - 3)$, so the roots are $2$ and $3$, "
    "and indeed $2 + 3 = 5$.\n"
    "The final answer is $\\boxed{5}$."
)
RAMBLING = GSM8K_GOOD + " Let me double check this once more, I am not completely sure." * 30


def scores(outcome: str, row: dict) -> dict[str, float]:
    """Each component's score of one outcome, and the weighted total."""
    parts = {name: reward([outcome], [row])[0] for name, reward in REWARDS.items()}
    parts["total"] = sum(WEIGHTS[name] * parts[name] for name in WEIGHTS)
    return parts


@pytest.mark.parametrize(
    ("outcome", "row"),
    [(GSM8K_GOOD, GSM8K), (COMPETITION_GOOD, COMPETITION)],
    ids=["gsm8k", "competition"],
)
def test_a_good_worked_solution_scores_high_everywhere(outcome: str, row: dict) -> None:
    parts = scores(outcome, row)
    assert parts == pytest.approx(
        {"length": 1.0, "formulas": 1.0, "concepts": 1.0, "structure": 1.0, "total": 1.0}
    )
    assert parts["total"] > 0.7


@pytest.mark.parametrize("row", [GSM8K, COMPETITION], ids=["gsm8k", "competition"])
@pytest.mark.parametrize("outcome", ["", "   \n\t"], ids=["empty", "blank"])
def test_an_empty_answer_scores_zero_everywhere(outcome: str, row: dict) -> None:
    assert scores(outcome, row) == {name: 0.0 for name in [*WEIGHTS, "total"]}


@pytest.mark.parametrize(
    ("outcome", "row"),
    [
        ("1+1=2 2+2=4 3+3=6 4+4=8 5+5=10 6+6=12 7+7=14 8+8=16 9+9=18", GSM8K),
        ("= = + ^ \\frac{}{} = = + ^ \\frac{}{} " * 3, COMPETITION),
        (
            "$$x^2 = 5x - 6 \\implies (x-2)(x-3) = 0 \\implies x = 2, 3 \\implies 2 + 3 = 5$$",
            COMPETITION,
        ),
    ],
    ids=["numbers", "latex", "equations"],
)
def test_a_wall_of_symbols_scores_low(outcome: str, row: dict) -> None:
    parts = scores(outcome, row)
    assert parts["formulas"] == 0.0
    assert parts["concepts"] == 0.0
    assert parts["total"] < 0.35


@pytest.mark.parametrize("row", [GSM8K, COMPETITION], ids=["gsm8k", "competition"])
def test_the_question_repeated_scores_low(row: dict) -> None:
    parts = scores(row["question"], row)
    assert parts["formulas"] == 0.0
    assert parts["concepts"] == 0.0
    assert parts["total"] < 0.35


@pytest.mark.parametrize("row", [GSM8K, COMPETITION], ids=["gsm8k", "competition"])
def test_a_bare_final_number_is_short_and_unstructured(row: dict) -> None:
    parts = scores(row["answer"], row)
    assert parts["length"] == 0.0
    assert parts["structure"] == 0.0
    assert parts["total"] < 0.1


def test_a_long_rambling_answer_gets_no_length_score_and_its_loop_no_credit() -> None:
    parts = scores(RAMBLING, GSM8K)
    assert parts["length"] == 0.0
    assert parts["formulas"] == parts["concepts"] == 0.0  # the repeated filler voids them
    assert parts["total"] < 0.35
    assert parts["structure"] < scores(GSM8K_GOOD, GSM8K)["structure"]
    assert parts["total"] < scores(GSM8K_GOOD, GSM8K)["total"]


def test_length_window_and_falloff() -> None:
    # A reference of 100 words: full score from 50 to 200 words, 0 at <= 10 or >= 500.
    assert [length_fit(n, 100) for n in (50, 100, 200)] == [1.0, 1.0, 1.0]
    assert [length_fit(n, 100) for n in (0, 5, 10, 500, 1000)] == [0.0] * 5
    assert length_fit(25, 100) == pytest.approx(math.log(2.5) / math.log(5))
    assert length_fit(300, 100) == pytest.approx(math.log(5 / 3) / math.log(2.5))
    # A one-number reference asks for 10-40 words.
    assert length_fit(10, 1) == length_fit(40, 1) == 1.0
    assert length_fit(1, 1) == 0.0
    assert (
        LengthFit(reference_field="solution")(["a b c d e"] * 2, [{"solution": "7"}] * 2)
        == [pytest.approx(length_fit(5, 20))] * 2
    )


def test_what_counts_as_a_formula() -> None:
    assert formulas("so x + 3 = 7 and a_n = 2a_{n-1}") == ["x+3=7", "a_n=2a_{n-1}"]
    assert formulas("since $x^2 \\geq 0$ always") == ["x^2\\geq0"]
    assert formulas("half is \\frac{1}{2} and \\sqrt{4} is two") == ["\\frac{1}{2}", "\\sqrt{4}"]
    assert formulas("1+1=2 2+2=4") == ["1+1=2", "2+2=4"]
    assert formulas("She makes 3 * 4 = 12 dollars, then 3 * 4 = 12 again.") == ["3*4=12"]
    assert formulas("for $ax^2 + bx + c = 0$, x = 4 \\implies y = 5") == [
        "ax^2+bx+c=0",
        "x=4",
        "y=5",
    ]
    for text in ("the answer is 12", "x", "-5", "$18", "\\boxed{5}", "x equals 4", "Step 1."):
        assert formulas(text) == [], text


def test_a_formula_copied_from_the_question_does_not_count() -> None:
    question = COMPETITION["question"]
    assert new_formulas("We solve $x^2-5x+6=0$ today.", question) == []
    copied = "We need to solve x^2 - 5x + 6 = 0, which is the given equation, and that is it."
    assert FormulaUse()([copied], [COMPETITION]) == [0.0]
    solved = copied + " It factors as (x - 2)(x - 3) = 0."
    assert FormulaUse()([solved], [COMPETITION]) == [pytest.approx(1 / 4)]


def test_formula_target_comes_from_the_reference_and_prose_matters() -> None:
    row = {"question": "Add them.", "reference": "We get 2 + 2 = 4 and 3 + 3 = 6."}
    assert FormulaUse()(["We find that 2 + 2 = 4 here."], [row]) == [0.5]
    assert FormulaUse()(["We find that 2 + 2 = 4 and 3 + 3 = 6 here."], [row]) == [1.0]
    assert prose_share("2 + 2 = 4") == 0.0
    assert prose_share("We find that 2 + 2 = 4") == pytest.approx(3 / 8)
    # Both formulas, but one word among nine: the prose factor is (1 / 9) / 0.3.
    assert FormulaUse()(["So 2+2=4 3+3=6 7 8 9 10 11 12"], [row]) == [pytest.approx(1 / 2.7)]


def test_key_terms_come_from_reference_concepts_and_skip_the_question() -> None:
    wanted = key_terms(COMPETITION["reference"], COMPETITION["question"], COMPETITION["concepts"])
    assert wanted == ["vieta", "formula", "1", "quadratic", "equation", "factoring"]
    # Without concepts: the question's words (sum, roots) and numbers (2, 5, 0) are dropped.
    assert key_terms(COMPETITION["reference"], COMPETITION["question"], []) == [
        "1",
        "vieta",
        "formula",
    ]
    # Fewer than three terms left without the question's: all of them count.
    question = "Find the area of a circle of radius 3."
    reference = "The area of a circle is pi r^2, so the area is 9 pi. Area: 9 pi."
    assert key_terms(reference, question, []) == ["area", "9", "circle", "2"]
    assert key_terms(GSM8K["reference"], GSM8K["question"], []) == ["9", "18", "3", "4"]

    reward = ConceptCoverage(concepts_field="ideas")
    row = {"question": "Q?", "reference": "Use the parity argument.", "ideas": ["pigeonhole"]}
    text = "Both the parity argument and the pigeonhole principle apply here, as shown."
    assert reward([text], [row]) == [1.0]
    assert reward(["The parity argument applies here, as it was shown."], [row]) == [
        pytest.approx(2 / 3)
    ]
    row_without = {"question": "Q?", "reference": "Use the parity argument."}
    assert reward(["The parity argument applies here, as it was shown."], [row_without]) == [1.0]


def test_the_final_answer_check() -> None:
    for text in (
        "The answer is 18.",
        "Final answer: 5",
        "so x = \\boxed{5}",
        "work\n#### 18",
        "Answer = 7",
    ):
        assert has_final_answer(text), text
    for text in ("18", "\\boxed{}", "the answer", "#### ", "we answer quickly"):
        assert not has_final_answer(text), text


def test_structure_sub_checks() -> None:
    structure = Structure()
    row = {"question": "How many?", "reference": "unused"}
    # One sentence with the final answer and prose: 0.3 + 0.3.
    assert structure(["The answer is 18."], [row]) == [pytest.approx(0.6)]
    # Two sentences, one marker: 0.2 + 0.1 + 0.3 + 0.3.
    assert structure(["We add them. So the answer is 18."], [row]) == [pytest.approx(0.9)]
    # Repeated lines are degenerate: 0.2 (steps) + 0.2 (markers: "so" twice).
    assert structure(["so it is ten\nso it is ten\nso it is ten"], [row]) == [pytest.approx(0.4)]
    # A copy of the question is degenerate.
    question = {"question": GSM8K["question"]}
    assert structure([GSM8K["question"]], [question]) == [pytest.approx(0.2)]
    # Numbered lines count as markers.
    assert structure(["1. Add the eggs.\n2. Sell the rest."], [row]) == [pytest.approx(0.7)]


def test_missing_fields_raise_and_none_reads_as_empty() -> None:
    with pytest.raises(KeyError, match="'reference'"):
        FormulaUse()(["x = 1"], [{"question": "q"}])
    with pytest.raises(KeyError, match="'question'"):
        ConceptCoverage()(["x = 1"], [{"reference": "r"}])
    # Length does not read the question, structure does not read the reference.
    assert LengthFit()(["one two"], [{"reference": None}]) == [0.0]
    assert Structure()(["The answer is 4."], [{"question": None}]) == [pytest.approx(0.6)]
    assert ConceptCoverage()(["Anything at all."], [{"question": "q", "reference": ""}]) == [0.0]


def test_the_reward_config_composes_and_scores_a_batch() -> None:
    reward = build(OmegaConf.load(PROJECT_ROOT / "conf" / "reward" / "heuristic.yaml"))
    assert isinstance(reward, CombinedReward)
    assert reward.weights == pytest.approx({**WEIGHTS, "stated_answer": 0.0})
    outcomes = [GSM8K_GOOD, "", GSM8K["question"], COMPETITION_GOOD]
    rows = [GSM8K, GSM8K, GSM8K, COMPETITION]
    result = reward(outcomes, rows)
    assert isinstance(result, Scores)
    assert list(result.parts) == [*WEIGHTS, "stated_answer"]
    assert result.errors == {name: 0 for name in result.parts}
    stated = [float(has_final_answer(outcome)) for outcome in outcomes]
    assert result.parts["stated_answer"].tolist() == stated  # reported, weighed 0
    expected = [scores(outcome, row)["total"] for outcome, row in zip(outcomes, rows, strict=True)]
    assert result.total.tolist() == pytest.approx(expected)
    assert result.total[0] > 0.7 and result.total[1] == 0.0 and result.total[2] < 0.35


@pytest.mark.parametrize(
    "text", ["1,2", "3, 4", "x = 1.\n 2", "so 5 7", "(2) 3", ", 1", "1 ,\n 2 3"]
)
def test_numbers_after_a_break_are_read_without_error(text: str) -> None:
    assert isinstance(formulas(text), list)


def test_stated_answer_is_one_for_an_answer_that_arrives() -> None:
    rows = [{"question": None, "reference": None}] * 4
    texts = ["So x = 3. The answer is 3.", "Final answer: 12", "Then x = 3 and so", ""]
    assert StatedAnswer()(texts, rows) == [1.0, 1.0, 0.0, 0.0]
