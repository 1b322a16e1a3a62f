"""scripts/char_best_of_n.py: each window's highest-scored fill is the one reported, and the
sampled fills are scored and counted as the recipe's reward and role do."""

from __future__ import annotations

import pytest
import torch

from scripts.char_best_of_n import drawn, favourite, within_window_correlation
from src.recipes.char_diffusion.infill import Infill
from src.recipes.char_diffusion.network import load_char_diffusion
from src.recipes.char_diffusion.sampler import CharDiffusionSampler
from src.reward.combine import CombinedReward

ROWS = [
    {"masked": "the c█t s█t on ██e mat", "answer": "aath"},
    {"masked": "a d██ ran ███ay fast!!", "answer": "ogawa"},
    {"masked": "██ one more window ███", "answer": "nobig"},
]


def test_the_favourite_is_each_windows_highest_score_the_first_of_ties():
    scores = torch.tensor([[0.2, 0.9, 0.9], [0.7, 0.1, 0.3]])
    restored = torch.tensor([[1.0, 0.5, 0.0], [0.25, 1.0, 1.0]])
    score, chars = favourite(scores, restored)
    assert score == pytest.approx((0.9 + 0.7) / 2)
    assert chars == pytest.approx((0.5 + 0.25) / 2)


def test_the_correlation_is_taken_within_each_window_then_averaged():
    scores = torch.tensor([[1.0, 2.0, 3.0], [0.5, 0.5, 0.5], [3.0, 2.0, 1.0], [0.0, 1.0, 0.0]])
    restored = torch.tensor([[0.1, 0.2, 0.3], [0.0, 1.0, 0.0], [0.0, 0.5, 1.0], [1.0, 0.0, 0.0]])
    # +1 and -1 (the constant window left out), and for the last: x = (-1, 2, -1)/3,
    # y = (2, -1, -1)/3, so x.y / (|x| |y|) = -3 / 6 = -0.5
    assert within_window_correlation(scores, restored) == pytest.approx((1 - 1 - 0.5) / 3)
    assert within_window_correlation(torch.ones(2, 3), torch.rand(2, 3)) == 0.0


def test_drawn_scores_every_sampled_fill_window_by_window():
    torch.manual_seed(0)
    network = load_char_diffusion(None, max_length=24, hidden_size=32, num_layers=1, num_heads=2)
    network = network.eval()

    def vowels(outcomes: list[str], rows: list[dict]) -> list[float]:
        return [sum(char in "aeiou" for char in text) / len(text) for text in outcomes]

    reward = CombinedReward({"judge": vowels})
    scores, restored, log_probs = drawn(
        network, CharDiffusionSampler(24), Infill("█"), reward, ROWS, n=5, windows=2
    )
    assert scores.shape == restored.shape == log_probs.shape == (3, 5)
    assert (log_probs < 0).all() and log_probs.std() > 0  # a sum of the fill's log-probs
    assert ((restored >= 0) & (restored <= 1)).all()
    assert ((scores >= 0) & (scores <= 1)).all()
    assert scores.std() > 0  # the fills were sampled, not one greedy fill repeated
