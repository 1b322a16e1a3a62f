"""The judge's negatives: windows filled by generators (greedy or sampled) and windows with
random characters swapped in, each the length of the real window and different from it."""

from __future__ import annotations

import random

import pytest
import torch

from src.data.char_windows import CharWindowDataModule
from src.model.char_diffusion import load_char_diffusion
from src.pretraining.judge import Corruptor, swapped
from src.utils.errors import ConfigError


@pytest.fixture
def data(tmp_path) -> CharWindowDataModule:
    path = tmp_path / "text.txt"
    path.write_text("The glass stood high and the wind fell light from the west. " * 12)
    windows = CharWindowDataModule(path=str(path), window=24, val_size=2, seed=0)
    windows.prepare_rows()
    return windows


def corruptor(data, temperatures, weights) -> Corruptor:
    torch.manual_seed(0)
    generator = load_char_diffusion(None, max_length=24, hidden_size=32, num_layers=1, num_heads=2)
    generators = {"generated": generator.eval(), "early": generator.eval()}
    return Corruptor(generators, temperatures, 0.95, data.remasked, "█", weights, max_swaps=3)


@pytest.mark.parametrize("kind", ["generated", "early", "swapped"])
def test_each_kind_of_negative_is_a_changed_window_of_the_same_length(data, kind):
    rows = data.train_rows[:8]
    made = corruptor(data, [0.0, 1.0], {kind: 1.0}).corrupt(rows, random.Random(0))
    assert [len(text) for text in made] == [24] * 8
    assert "█" not in "".join(made)
    assert sum(text != row["text"] for text, row in zip(made, rows, strict=True)) >= 7


def test_swapping_changes_exactly_that_many_characters():
    text = "abcdefghij" * 3
    changed = swapped(text, 4, random.Random(1))
    assert sum(a != b for a, b in zip(text, changed, strict=True)) == 4


def test_temperatures_must_be_a_list_of_non_negative_numbers(data):
    with pytest.raises(ConfigError, match="stages.judge.train.temperatures"):
        corruptor(data, [], {"generated": 1.0})
    with pytest.raises(ConfigError, match="stages.judge.train.temperatures"):
        corruptor(data, [-1.0], {"generated": 1.0})
