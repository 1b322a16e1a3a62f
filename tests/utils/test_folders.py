"""published_folder: readers see no folder or a complete one; check_writable asks the file
system itself whether a folder can be made where a run will write."""

from __future__ import annotations

from pathlib import Path

import pytest

from src.utils.errors import ConfigError
from src.utils.folders import check_writable, published_folder


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


def test_a_folder_to_be_under_a_writable_one_passes_and_leaves_nothing(tmp_path):
    check_writable(tmp_path / "runs" / "one", "paths.run_dir")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("kind", ["file", "proc"])
def test_a_folder_that_cannot_be_made_is_one_line_naming_the_key(tmp_path, kind):
    if kind == "file":  # a file where a folder belongs
        (tmp_path / "taken").write_text("")
        path, blocking = tmp_path / "taken" / "run", tmp_path / "taken"
    else:  # permission bits let root write here, but nothing can be made
        path, blocking = Path("/proc/x/run"), Path("/proc")
    with pytest.raises(ConfigError) as caught:
        check_writable(path, "paths.run_dir")
    assert str(caught.value) == (
        f"paths.run_dir={path}: {blocking} is not a writable folder; point paths.run_dir "
        "somewhere this user can write, or set it to null"
    )
