"""published_folder: readers see no folder or a complete one."""

from __future__ import annotations

import pytest

from src.utils.folders import published_folder


def test_the_folder_appears_whole_when_the_block_ends(tmp_path):
    target = tmp_path / "model"
    with published_folder(target) as scratch:
        (scratch / "config.json").write_text("{}")
        assert not target.exists()  # nothing to read until it is complete
    assert (target / "config.json").read_text() == "{}"
    assert [p.name for p in tmp_path.iterdir()] == ["model"]


def test_a_failed_write_leaves_nothing(tmp_path):
    target = tmp_path / "model"
    with pytest.raises(RuntimeError, match="disk full"), published_folder(target) as scratch:
        (scratch / "config.json").write_text("{}")
        raise RuntimeError("disk full")
    assert list(tmp_path.iterdir()) == []


def test_the_copy_published_first_is_kept(tmp_path):
    target = tmp_path / "model"
    with published_folder(target) as scratch:
        (scratch / "config.json").write_text("mine")
        target.mkdir()  # another job of the sweep finished first
        (target / "config.json").write_text("theirs")
    assert (target / "config.json").read_text() == "theirs"
    assert [p.name for p in tmp_path.iterdir()] == ["model"]
