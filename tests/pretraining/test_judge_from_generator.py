"""A judge started from the pretrained generator: the generator's encoder (size and weights)
under a fresh score head, saved and reloaded as any judge."""

from __future__ import annotations

import pytest
import torch

from src.recipes.char_diffusion.judge_network import load_char_judge
from src.recipes.char_diffusion.judge_stage import judge_from_generator
from src.recipes.char_diffusion.network import load_char_diffusion

GENERATOR = {"max_length": 24, "hidden_size": 32, "num_layers": 2, "num_heads": 2}


def test_the_judge_copies_the_generators_encoder_and_keeps_its_own_dropout_and_mask(tmp_path):
    torch.manual_seed(0)
    generator = load_char_diffusion(None, **GENERATOR, intermediate_size=64, dropout=0.1)
    model = {"hidden_size": 128, "num_layers": 1, "dropout": 0.0, "sees_mask": True}
    judge = judge_from_generator(generator, model)
    assert judge.settings == {
        **GENERATOR, "intermediate_size": 64, "dropout": 0.0, "sees_mask": True,
        "char_head": False, "score": "window",
    }  # fmt: skip
    theirs = generator.encoder.state_dict()
    mine = judge.encoder.state_dict()
    assert mine.keys() == theirs.keys()
    assert all(torch.equal(mine[name], theirs[name]) for name in mine)
    assert judge.head.weight.shape == (1, 32)
    text, masked = "the cat sat on the mat", "the c█t sat on the mat"
    judge.eval().save(tmp_path / "judge")
    again = load_char_judge(tmp_path / "judge")
    assert again.settings == judge.settings
    assert again.score([text], masked=[masked]) == pytest.approx(
        judge.score([text], masked=[masked])
    )


def test_the_copy_is_the_judges_own():
    torch.manual_seed(0)
    generator = load_char_diffusion(None, **GENERATOR, intermediate_size=64)
    judge = judge_from_generator(generator, {"dropout": 0.0})
    before = [p.detach().clone() for p in generator.encoder.parameters()]
    for parameter in judge.encoder.parameters():
        parameter.data.add_(1.0)
    assert all(
        torch.equal(a, b) for a, b in zip(before, generator.encoder.parameters(), strict=True)
    )
