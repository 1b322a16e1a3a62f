"""The infill role: the masked window is the prompt; the filled window is what the judge
scores, with the share of characters restored as a detail."""

from __future__ import annotations

from src.policy.infill import Infill

ROW = {"masked": "the c█t s██ on", "text": "the cat sat on", "answer": "aat"}


def test_outcomes_are_the_filled_windows_with_the_share_restored():
    role = Infill()
    outcomes = role.outcomes(["aat", "oxt", "a"], [ROW] * 3)
    assert outcomes.texts == ["the cat sat on", "the cot sxt on", "the cat s██ on"]
    assert [d["char_accuracy"] for d in outcomes.details] == [1.0, 1 / 3, 1 / 3]
    assert outcomes.details[1]["filled"] == "the cot sxt on"


def test_prompts_and_supervised_targets():
    role = Infill()
    assert role.prompts([ROW]) == ["the c█t s██ on"]
    assert role.sft_targets([ROW]) == ["aat"]
    assert role.prepare(None, [ROW]) == {}
