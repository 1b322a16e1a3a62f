"""The judge's negatives: windows filled by generators (greedy or sampled) and windows with
random characters swapped in, each the length of the real window and different from it."""

from __future__ import annotations

import random
import re

import pytest
import torch

from src.recipes.char_diffusion.infill import restored
from src.recipes.char_diffusion.judge_stage import Corruptor, Fills, Masking, swapped
from src.recipes.char_diffusion.network import load_char_diffusion
from src.recipes.char_diffusion.settings import SETTINGS
from src.recipes.char_diffusion.windows import CharWindowDataModule
from src.utils.errors import ConfigError
from src.utils.setting import checked


@pytest.fixture
def data(tmp_path) -> CharWindowDataModule:
    path = tmp_path / "text.txt"
    path.write_text("The glass stood high and the wind fell light from the west. " * 12)
    windows = CharWindowDataModule(path=str(path), window=24, val_size=2, seed=0)
    windows.prepare_rows()
    return windows


def generator(seed: int = 0):
    torch.manual_seed(seed)
    network = load_char_diffusion(None, max_length=24, hidden_size=32, num_layers=1, num_heads=2)
    return network.eval()


def corruptor(
    data, temperatures, weights, replay_temperatures=None, sees_mask=False, **more
) -> Corruptor:
    pretrained = generator()
    generators = {"generated": [pretrained], "early": [pretrained], "replay": [generator(1)]}
    fills = Fills(temperatures, 0.95, replay_temperatures=replay_temperatures)
    masking = Masking(data.remasked, "█", sees_mask)
    return Corruptor(generators, fills, masking, weights, 3, **more)


@pytest.mark.parametrize("kind", ["generated", "early", "swapped", "replay"])
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


@pytest.mark.parametrize(
    "key",
    [
        "stages.judge.train.temperatures",
        "stages.judge.train.replay_temperatures",
        "rounds.replay_temperatures",
    ],
)
def test_temperatures_are_declared_as_lists_of_non_negative_numbers(key):
    """Declared once with the task's keys (checked when the config is composed, and by
    every stage's settings check), never again by the corruptor."""
    assert checked(SETTINGS, key, [0.0, 1]) == [0.0, 1]
    for wrong in ([], [-1.0], 0.5, ["hot"], [True]):
        with pytest.raises(ConfigError, match=re.escape(f"{key} must be a non-empty list")):
            checked(SETTINGS, key, wrong)


def test_replayed_policies_fill_at_their_own_temperatures(data):
    rows = data.train_rows[:8]
    greedy = corruptor(data, [1.0], {"replay": 1.0}, replay_temperatures=[0.0])
    first = greedy.make("replay", rows, random.Random(0))
    assert first == greedy.make("replay", rows, random.Random(0))


def test_worse_only_counts_a_fill_only_below_the_generators_greedy_fill(data):
    rows = data.train_rows[:16]
    made = corruptor(data, [0.0], {"generated": 1.0}, worse_only=True)
    texts, weights, labels, _ = made.corrupt_weighted(rows, random.Random(0))
    assert weights == [0.0] * 16  # the greedy fill itself is no worse than itself
    assert labels == [0.0] * 16
    sampled = corruptor(data, [1.0], {"generated": 1.0}, worse_only=True)
    assert set(sampled.corrupt_weighted(rows, random.Random(0))[1]) == {0.0, 1.0}
    swaps = corruptor(data, [1.0], {"swapped": 1.0}, worse_only=True)
    assert swaps.corrupt_weighted(rows, random.Random(0))[1] == [1.0] * 16  # always worse
    plain = corruptor(data, [1.0], {"generated": 1.0})
    assert plain.corrupt_weighted(rows, random.Random(0))[1:3] == ([1.0] * 16, [0.0] * 16)


def test_better_as_real_labels_fills_that_restore_more_than_the_greedy_fill_real(data):
    rows = data.train_rows[:64]

    def remask(row, rng):  # each row masked the same way whatever the draw
        return data.remasked(row, random.Random(row["text"]))

    def build(temperatures, **more):
        fills, masking = Fills(temperatures, 0.95), Masking(remask, "█")
        return Corruptor(
            {"generated": [generator()]}, fills, masking, {"generated": 1.0}, 3, **more
        )

    texts, weights, labels, _ = build([1.0], worse_only=True, better_as_real=True).corrupt_weighted(
        rows, random.Random(0)
    )
    greedy = build([0.0]).make("generated", rows, random.Random(0))
    for text, weight, label, reference, row in zip(
        texts, weights, labels, greedy, rows, strict=True
    ):
        masked = remask(row, None)["masked"]
        mine, theirs = (
            sum(m == "█" and a == b for m, a, b in zip(masked, filled, row["text"], strict=True))
            for filled in (text, reference)
        )
        assert (weight, label) == ((1.0, 1.0) if mine > theirs else (float(mine < theirs), 0.0))
    assert 1.0 in labels and 0.0 in weights  # better and as-good fills both happen
    compared = build([1.0], better_as_real=True).corrupt_weighted(rows, random.Random(0))
    assert compared[2] == labels and all(  # without worse_only, as good is a negative
        weight == 1.0 for weight in compared[1]
    )


def test_restored_counts_equal_characters_in_place():
    assert restored("abc", "abd") == 2
    assert restored("ab", "abc") == 2


@pytest.mark.parametrize("kind", ["generated", "swapped"])
def test_a_judge_that_sees_the_mask_is_shown_where_each_negative_was_changed(data, kind):
    rows = data.train_rows[:16]
    made = corruptor(data, [1.0], {kind: 1.0}, sees_mask=True).corrupt_weighted(
        rows, random.Random(0)
    )
    for text, masked, row in zip(made.texts, made.masked, rows, strict=True):
        marked = {i for i, char in enumerate(masked) if char == "█"}
        changed = {i for i, (a, b) in enumerate(zip(text, row["text"], strict=True)) if a != b}
        assert len(marked) == round(0.25 * 24)  # the data's mask ratio
        assert changed <= marked  # nothing outside the mask is touched
        assert all(masked[i] == row["text"][i] for i in range(24) if i not in marked)
    if kind == "swapped":
        assert all(text != row["text"] for text, row in zip(made.texts, rows, strict=True))


def test_real_windows_get_fresh_masks_only_for_a_judge_that_sees_them(data):
    rows = data.train_rows[:4]
    assert corruptor(data, [1.0], {"swapped": 1.0}).masks(rows, random.Random(0)) is None
    masks = corruptor(data, [1.0], {"swapped": 1.0}, sees_mask=True).masks(rows, random.Random(0))
    for masked, row in zip(masks, rows, strict=True):
        assert masked.count("█") == 6
        assert all(m in ("█", t) for m, t in zip(masked, row["text"], strict=True))


def test_swaps_without_the_mask_draw_as_before(data):
    rows = data.train_rows[:8]
    made = corruptor(data, [1.0], {"swapped": 1.0}).corrupt_weighted(rows, random.Random(3))
    rng = random.Random(3)
    rng.choices(["swapped"], [1.0], k=8)  # the kinds drawn first
    expected = [swapped(row["text"], rng.randint(1, 3), rng) for row in rows]
    assert made.texts == expected
    assert made.masked == [row["text"] for row in rows]  # nothing marked
