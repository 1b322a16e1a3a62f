"""scripts/char_decoding.py: one pass is the recipe's greedy sampler; more passes fill every
masked position and leave the rest of the window alone."""

from __future__ import annotations

import torch

from scripts.char_decoding import ORDERS, decode, pass_of
from src.recipes.char_diffusion.infill import Infill
from src.recipes.char_diffusion.network import load_char_diffusion
from src.recipes.char_diffusion.sampler import CharDiffusionSampler

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
    for steps, order in ((2, "sure"), (3, "sure"), (8, "sure"), (2, "span"), (3, "stride")):
        filled = decode(network, PROMPTS, "█", steps, order)
        for prompt, text in zip(PROMPTS, filled, strict=True):
            assert len(text) == len(prompt) and "█" not in text
            assert all(p == t for p, t in zip(prompt, text, strict=True) if p != "█")


def test_fixed_orders_name_the_pass_of_every_masked_position():
    assert pass_of("ab██c███", "█", 2, "span") == {2: 0, 3: 1, 5: 0, 6: 1, 7: 1}
    assert pass_of("ab██c███", "█", 8, "span") == {2: 0, 3: 1, 5: 0, 6: 1, 7: 2}
    assert pass_of("ab██c███", "█", 2, "stride") == {2: 0, 3: 1, 5: 0, 6: 1, 7: 0}
    assert set(ORDERS) == {"sure", "span", "stride"}
