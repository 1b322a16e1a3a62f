"""The one held-out scorer: greedy, one answer per row, means over every row scored."""

from __future__ import annotations

import pytest
import torch

from src.evaluation.greedy import GreedyScorer
from src.policy.generator import Generator
from src.reward.accuracy import AnswerAccuracy
from src.reward.combine import CombinedReward
from src.rollout.hf import HFSampler

ROWS = [{"question": f"What is {a} + 1?", "answer": str(a + 1)} for a in range(5)]


def length_score(outcomes: list[str], rows: list[dict]) -> list[float]:
    return [float(len(outcome)) for outcome in outcomes]


def test_means_cover_every_row_scored_since_the_last_call(tiny_lm):
    reward = CombinedReward({"accuracy": AnswerAccuracy(), "length": length_score})
    scorer = GreedyScorer(HFSampler(max_completion_length=4), Generator(), reward)
    first = scorer.score(tiny_lm, ROWS[:3])
    second = scorer.score(tiny_lm, ROWS[3:])
    assert first.rollout.completion_ids.size(0) == 3  # one answer per row
    lengths = torch.cat([first.reward_parts["length"], second.reward_parts["length"]])
    means = scorer.means()
    assert set(means) == {"reward", "accuracy", "length"}
    assert means["length"] == pytest.approx(float(lengths.mean()))
    assert scorer.means() == {}  # a new evaluation starts empty
    again = scorer.score(tiny_lm, ROWS[:3])
    assert again.rollout.completions == first.rollout.completions  # greedy: no sampling
