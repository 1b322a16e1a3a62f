"""scripts/char_decoding.py: one pass is the recipe's greedy sampler; more passes fill every
masked position and leave the rest of the window alone."""

from __future__ import annotations

import torch

from scripts.char_decoding import decode
from src.model.char_diffusion import load_char_diffusion
from src.policy.infill import Infill
from src.rollout.char_diffusion import CharDiffusionSampler

PROMPTS = ["the c█t s█t on ██e mat", "a d██ ran ███ay fast!!"]


def test_one_pass_is_the_greedy_sampler_and_more_passes_fill_every_mask():
    torch.manual_seed(0)
    network = load_char_diffusion(None, max_length=24, hidden_size=32, num_layers=1, num_heads=2)
    network = network.eval()
    greedy = CharDiffusionSampler(24).sample(network, PROMPTS, 1, greedy=True).completions
    infill = Infill("█")
    assert decode(network, PROMPTS, "█", 1) == [
        infill.filled(prompt, fill) for prompt, fill in zip(PROMPTS, greedy, strict=True)
    ]
    for steps in (2, 3, 8):
        filled = decode(network, PROMPTS, "█", steps)
        for prompt, text in zip(PROMPTS, filled, strict=True):
            assert len(text) == len(prompt) and "█" not in text
            assert all(p == t for p, t in zip(prompt, text, strict=True) if p != "█")
