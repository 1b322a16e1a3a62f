"""`data=char_diffusion`: text becomes masked character windows, the same from a seed, and
bad text or settings fail with the file or key named."""

from __future__ import annotations

import random

import pytest

from src.data.files import DataFileError
from src.recipes.char_diffusion.settings import SETTINGS as CHAR_SETTINGS
from src.recipes.char_diffusion.windows import CharWindowDataModule, mask_positions, shipped_corpus
from src.utils.errors import ConfigError, MissingFileError
from tests.helpers.declared import refusal

TEXT = "The quick brown fox jumps over the lazy dog.\n\n  It was   a fine day. " * 20


def windows(tmp_path, **settings) -> CharWindowDataModule:
    path = tmp_path / "text.txt"
    path.write_text(TEXT)
    data = CharWindowDataModule(path=str(path), val_size=4, **{"window": 32, **settings})
    data.prepare_rows()
    return data


def test_each_window_masks_exactly_the_ratio_in_spans_and_restores_to_the_text(tmp_path):
    data = windows(tmp_path, mask_ratio=0.25, min_span=2, max_span=5)
    rows = data.train_rows + data.val_rows
    assert len(rows) == len(" ".join(TEXT.split())) // 32
    for row in rows:
        assert len(row["masked"]) == len(row["text"]) == 32
        assert row["masked"].count("█") == len(row["answer"]) == 8
        chars = iter(row["answer"])
        restored = "".join(next(chars) if c == "█" else c for c in row["masked"])
        assert restored == row["text"]
        assert "  " not in row["text"] and "\n" not in row["text"]  # whitespace collapsed


def test_masks_depend_on_the_seed_only(tmp_path):
    first = windows(tmp_path, seed=3)
    again = windows(tmp_path, seed=3)
    other = windows(tmp_path, seed=4)
    assert first.train_rows == again.train_rows
    masks = {row["text"]: row["masked"] for row in first.train_rows + first.val_rows}
    moved = {row["text"]: row["masked"] for row in other.train_rows + other.val_rows}
    assert masks != moved


def test_mask_positions_are_spans_of_the_configured_lengths():
    positions = mask_positions(64, 0.25, 3, 3, random.Random(0))
    assert len(positions) == 16 and positions == sorted(set(positions))
    assert mask_positions(10, 0.01, 2, 8, random.Random(0)) != []  # at least one


def test_remasking_draws_new_spans_of_the_same_count(tmp_path):
    data = windows(tmp_path)
    row = data.train_rows[0]
    fresh = data.remasked(row, random.Random(123))
    assert fresh["text"] == row["text"] and fresh["masked"] != row["masked"]
    assert fresh["masked"].count("█") == row["masked"].count("█")


def test_a_folder_of_text_files_is_read_in_name_order(tmp_path):
    (tmp_path / "b.md").write_text("second " * 40)
    (tmp_path / "a.txt").write_text("first " * 40)
    (tmp_path / "skip.json").write_text("{}")
    data = CharWindowDataModule(path=str(tmp_path), window=16, val_size=1, seed=0)
    data.prepare_rows()
    texts = " ".join(row["text"] for row in data.train_rows + data.val_rows)
    assert "first" in texts and "second" in texts and "{}" not in texts


def test_the_shipped_corpus_is_a_few_hundred_kilobytes_of_text():
    text = shipped_corpus().read_text()
    assert len(text) > 300_000 and text.isascii()


@pytest.mark.parametrize(
    ("settings", "key"),
    [
        ({"mask_ratio": 0.0}, "data.mask_ratio"),
        ({"mask_ratio": 1.0}, "data.mask_ratio"),
        ({"window": 1}, "data.window"),
        ({"mask_char": "ab"}, "data.mask_char"),
    ],
)
def test_impossible_settings_name_their_key(settings, key):
    """Each refused by the task's declaration, when the config is composed."""
    values = {f"data.{name}": value for name, value in settings.items()}
    assert refusal(values, CHAR_SETTINGS).startswith(f"{key} must be")


def test_spans_that_cannot_be_drawn_are_refused_by_the_datamodule():
    with pytest.raises(ConfigError, match="data.min_span"):
        CharWindowDataModule(min_span=4, max_span=2)


def test_text_shorter_than_a_window_names_the_file_and_the_window(tmp_path):
    path = tmp_path / "short.txt"
    path.write_text("too short")
    data = CharWindowDataModule(path=str(path), window=64)
    with pytest.raises(DataFileError, match=r"short\.txt.*data\.window=64"):
        data.prepare_rows()


def test_an_empty_file_or_a_missing_path_is_refused(tmp_path):
    empty = tmp_path / "empty.txt"
    empty.write_text("  \n ")
    with pytest.raises(DataFileError, match="empty.txt: no text"):
        CharWindowDataModule(path=str(empty)).prepare_rows()
    with pytest.raises(MissingFileError, match="data.path="):
        CharWindowDataModule(path=str(tmp_path / "nothing.txt")).prepare_rows()
    folder = tmp_path / "folder"
    folder.mkdir()
    with pytest.raises(MissingFileError, match="no .txt or .md"):
        CharWindowDataModule(path=str(folder)).prepare_rows()
