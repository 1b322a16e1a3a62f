"""The overlap reward: each metric is torchmetrics' own value, blanks score 0, the config composes."""

from __future__ import annotations

import pytest
from omegaconf import OmegaConf
from torchmetrics.functional.text import bleu_score, rouge_score, squad

from src.reward.combine import CombinedReward
from src.reward.overlap import Overlap, bleu, clean_outcome, overlap_total, rouge_l, token_f1
from src.utils.config import build
from src.utils.resolvers import PROJECT_ROOT
from tests.helpers.declared import refusal


def squad_f1(prediction: str, reference: str) -> float:
    scores = squad(
        {"prediction_text": prediction, "id": "q"},
        {"answers": {"answer_start": [0], "text": [reference]}, "id": "q"},
    )
    return float(scores["f1"]) / 100


def rouge_l_f(prediction: str, reference: str) -> float:
    return float(rouge_score(prediction, reference, rouge_keys="rougeL")["rougeL_fmeasure"])


# (outcome, reference, outcome and reference as BLEU sees them, BLEU's n_gram)
PAIRS = {
    "case mismatch": ("The Radial Nerve", "radial nerve", "the radial nerve", "radial nerve", 2),
    "partial match": (
        "the ulnar nerve at the elbow",
        "ulnar nerve damage",
        "the ulnar nerve at the elbow",
        "ulnar nerve damage",
        3,
    ),
    "punctuation": ("Paris, France.", "Paris", "paris france", "paris", 1),
    "one word of two": ("radial", "radial nerve", "radial", "radial nerve", 1),
}


@pytest.mark.parametrize("name", sorted(PAIRS))
def test_each_metric_is_torchmetrics_value(name: str) -> None:
    outcome, reference, bleu_pred, bleu_ref, n_gram = PAIRS[name]
    expected_bleu = float(bleu_score([bleu_pred], [[bleu_ref]], n_gram=n_gram, smooth=True))
    assert token_f1(outcome, reference) == pytest.approx(squad_f1(outcome, reference))
    assert rouge_l(outcome, reference) == pytest.approx(rouge_l_f(outcome, reference))
    assert bleu(outcome, reference) == pytest.approx(expected_bleu)
    assert overlap_total(outcome, reference) == pytest.approx(
        squad_f1(outcome, reference) + rouge_l_f(outcome, reference) + expected_bleu
    )
    for metric in ("f1", "rouge_l", "bleu", "total"):
        assert 0.0 <= Overlap(metric)([outcome], [{"answer_text": reference}])[0] <= 3.0


def test_values_on_hand_checked_pairs() -> None:
    # Case is ignored; "the" is dropped by SQuAD and ROUGE-L counts 2 of 3 outcome words.
    assert token_f1("The Radial Nerve", "radial nerve") == pytest.approx(1.0)
    assert rouge_l("The Radial Nerve", "radial nerve") == pytest.approx(0.8)
    # unigrams 2/3, bigrams smoothed (1 + 1) / (2 + 1), outcome longer: no brevity penalty.
    assert bleu("The Radial Nerve", "radial nerve") == pytest.approx(2 / 3)
    # One word of two: unigram precision 1 times the brevity penalty exp(1 - 2/1).
    assert bleu("radial", "radial nerve") == pytest.approx(0.36787944, abs=1e-6)
    # Two words sharing no bigram: torchmetrics' BLEU is 0, smoothing or not.
    assert bleu("radial artery", "radial nerve") == 0.0
    assert token_f1("radial artery", "radial nerve") == pytest.approx(0.5)


def test_a_perfect_answer_scores_one_on_each_metric() -> None:
    row = {"answer_text": "Radial nerve"}
    for answer in ("Radial nerve", "Answer: radial nerve.", "  answer : RADIAL NERVE \n"):
        assert Overlap("f1")([answer], [row]) == [pytest.approx(1.0)]
        assert Overlap("rouge_l")([answer], [row]) == [pytest.approx(1.0)]
        assert Overlap("bleu")([answer], [row]) == [pytest.approx(1.0)]
        assert Overlap("total")([answer], [row]) == [pytest.approx(3.0)]
    assert Overlap("total")(["Paris"], [{"answer_text": "paris"}]) == [pytest.approx(3.0)]


def test_answer_prefix_is_stripped_but_every_line_counts() -> None:
    assert clean_outcome("  Answer: Paris\nbecause ") == "Paris\nbecause"
    assert clean_outcome("ANSWER:Paris") == "Paris"
    assert clean_outcome("The answer: Paris") == "The answer: Paris"
    # The second line counts: F1 is below 1.
    assert token_f1(clean_outcome("Answer: Paris\nin France"), "Paris") < 1.0


@pytest.mark.parametrize("metric", ["f1", "rouge_l", "bleu", "total"])
def test_blank_outcomes_and_references_score_zero(metric: str) -> None:
    reward = Overlap(metric, reference_field="gold")
    outcomes = ["", "   ", "Answer:", "...", "Paris", "Paris"]
    rows = [{"gold": "Paris"}] * 4 + [{"gold": ""}, {"gold": None}]
    assert reward(outcomes, rows) == [0.0] * 6


def test_article_only_texts_get_no_token_f1() -> None:
    # SQuAD normalises both to "" and calls that an exact match; here it scores 0.
    assert squad_f1("the", "a") == 1.0
    assert token_f1("the", "a") == 0.0
    assert token_f1("The.", "the") == 0.0


def test_bad_settings_and_rows() -> None:
    said = refusal({"reward.functions.f1.metric": "meteor"})
    assert (
        said == "reward.functions.f1.metric must be one of f1, rouge_l, bleu, total, got 'meteor'"
    )
    with pytest.raises(KeyError, match="answer_text"):
        Overlap()(["Paris"], [{"answer": "Paris"}])


def test_the_reward_config_composes_and_scores_a_batch() -> None:
    reward = build(OmegaConf.load(PROJECT_ROOT / "conf" / "reward" / "overlap.yaml"))
    assert isinstance(reward, CombinedReward)
    outcomes = ["Answer: radial nerve", "ulnar", "", "the radial nerve"]
    rows = [{"answer_text": "radial nerve"}] * 4
    total, parts, errors = reward(outcomes, rows)
    assert list(parts) == ["f1", "rouge_l", "bleu", "overlap"]
    assert errors == {name: 0 for name in parts}
    three = parts["f1"] + parts["rouge_l"] + parts["bleu"]
    assert total.tolist() == pytest.approx(three.tolist())
    assert parts["overlap"].tolist() == pytest.approx(three.tolist())
    assert total.tolist()[:3] == pytest.approx([3.0, 0.0, 0.0])
    assert 1.0 < total[3].item() < 3.0
