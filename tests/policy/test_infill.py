"""The infill role: the masked window is the prompt; the filled window is what the judge
scores, with the share of characters restored as a detail."""

from __future__ import annotations

from src.recipes.char_diffusion.infill import Infill, degenerate_share

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


def test_a_span_is_degenerate_when_its_fill_makes_a_run_the_text_never_holds():
    masked = "ab███cd e██ f"
    assert degenerate_share(masked, "abxyzcd eon f", "█") == 0.0
    assert degenerate_share(masked, "abeeecd eon f", "█") == 0.5  # three of one letter
    assert degenerate_share(masked, "abxyzcd en  f", "█") == 0.5  # a space beside the text's
    assert degenerate_share(masked, "abx  cd eon f", "█") == 0.5  # two spaces in a span
    assert degenerate_share(masked, "aaaaacd e   f", "█") == 1.0
    assert degenerate_share("abcdef", "abcdef", "█") == 0.0  # no spans


def test_a_run_reaching_from_the_text_into_the_span_counts():
    # "dear█████n thrush": the fill continues the e of the text into a run
    assert degenerate_share("dea█████n", "deaeeeeen", "█") == 1.0
    assert degenerate_share("de██ song", "deee song", "█") == 1.0


def test_outcomes_carry_the_degenerate_share_beside_the_accuracy():
    outcomes = Infill().outcomes(["aat", "   "], [ROW] * 2)
    # "the c t s   on": the first span's space sits between letters, the second's run on
    assert [d["degenerate_spans"] for d in outcomes.details] == [0.0, 0.5]
