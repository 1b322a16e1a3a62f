"""Appending to a file a stopped run left with a half-written last line loses only that line."""

from __future__ import annotations

from src.utils.appending import append_lines


def test_new_lines_start_on_a_line_of_their_own(tmp_path):
    path = tmp_path / "cache.jsonl"
    append_lines(path, "one\n")  # a new file
    append_lines(path, "two\n")
    assert path.read_text() == "one\ntwo\n"
    path.write_text("one\ntwo\nthr")  # cut short
    append_lines(path, "four\nfive\n")
    assert path.read_text().splitlines() == ["one", "two", "thr", "four", "five"]
    path.write_text("")
    append_lines(path, "six\n")
    assert path.read_text() == "six\n"
