"""Loading a retrieval corpus: JSONL rows and folders of text files, and every way one is bad."""

from __future__ import annotations

import pytest

from src.data.files import DataFileError
from src.retrieval.corpus import (
    SAMPLE_CORPUS,
    Document,
    corpus_fingerprint,
    load_corpus,
)
from src.utils.errors import ConfigError, MissingFileError, UserError
from tests.helpers.files import write_jsonl


def test_jsonl_rows_become_documents_with_defaults(tmp_path):
    path = write_jsonl(
        tmp_path / "c.jsonl",
        [
            {"id": "a", "title": "Anthrax", "content": "Caused by Bacillus anthracis."},
            {"content": "  No id, no title.  ", "extra": 1},
            {"id": 7, "title": None, "content": "An integer id."},
        ],
    )
    assert load_corpus(path) == [
        Document("a", "Anthrax", "Caused by Bacillus anthracis."),
        Document("2", "", "No id, no title."),  # id = line number, title = ""
        Document("7", "", "An integer id."),
    ]


def test_a_folder_of_text_files_is_read_recursively_and_sorted(tmp_path):
    (tmp_path / "b.md").write_text("# Cholera\n\nCaused by Vibrio cholerae.\n")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "a.txt").write_text("\n\nTetanus\nCaused by Clostridium tetani.")
    (tmp_path / "one_line.txt").write_text("Just a sentence.")
    (tmp_path / "blank.txt").write_text("  \n")
    (tmp_path / "ignored.csv").write_text("x,y")
    assert load_corpus(tmp_path) == [
        Document("b.md", "Cholera", "Caused by Vibrio cholerae."),
        Document("one_line.txt", "Just a sentence.", "Just a sentence."),
        Document("sub/a.txt", "Tetanus", "Caused by Clostridium tetani."),
    ]


def test_a_malformed_line_is_named_by_file_and_line(tmp_path):
    path = tmp_path / "c.jsonl"
    path.write_text('{"id": "a", "content": "fine"}\n{"id": "b", "content": \n')
    with pytest.raises(DataFileError, match=r"c\.jsonl:2: malformed JSON"):
        load_corpus(path)


def test_a_row_without_content_is_named_by_file_line_and_field(tmp_path):
    path = write_jsonl(tmp_path / "c.jsonl", [{"content": "ok"}, {"id": "b", "title": "T"}])
    with pytest.raises(DataFileError, match=r"c\.jsonl:2: missing field 'content'"):
        load_corpus(path)


def test_a_field_that_is_not_a_string_is_named(tmp_path):
    path = write_jsonl(tmp_path / "c.jsonl", [{"id": "a", "title": ["x"], "content": "ok"}])
    with pytest.raises(DataFileError, match=r"c\.jsonl:1: field 'title' must be a string"):
        load_corpus(path)


@pytest.mark.parametrize("make", ["empty file", "blank file", "empty folder"])
def test_an_empty_corpus_is_refused_naming_the_path(tmp_path, make):
    path = tmp_path / "corpus.jsonl"
    if make == "empty file":
        path.write_text("")
    elif make == "blank file":
        path.write_text("\n  \n")
    else:
        path = tmp_path / "texts"
        path.mkdir()
        (path / "notes.csv").write_text("not a text file")
    with pytest.raises(ConfigError, match="holds no documents") as error:
        load_corpus(path)
    assert str(path) in str(error.value) and "\n" not in str(error.value)


def test_a_missing_path_is_a_missing_file_error_in_one_line(tmp_path):
    with pytest.raises(MissingFileError) as error:
        load_corpus(tmp_path / "nowhere.jsonl")
    message = str(error.value)
    assert message.startswith(
        f"retrieval.corpus: no file or folder at {tmp_path / 'nowhere.jsonl'};"
    )
    assert "\n" not in message and isinstance(error.value, UserError)


def test_duplicate_ids_are_refused_naming_the_id(tmp_path):
    path = write_jsonl(
        tmp_path / "c.jsonl",
        [{"id": "x", "content": "one"}, {"id": "y", "content": "two"}, {"id": "x", "content": "3"}],
    )
    with pytest.raises(DataFileError, match="duplicate document id 'x'"):
        load_corpus(path)


def test_the_fingerprint_changes_with_any_field_and_the_order():
    documents = [Document("a", "A", "alpha"), Document("b", "B", "beta")]
    base = corpus_fingerprint(documents)
    assert base == corpus_fingerprint(list(documents)) and len(base) == 64
    changed = [
        [Document("a", "A", "alpha!"), documents[1]],
        [Document("a", "A2", "alpha"), documents[1]],
        [Document("c", "A", "alpha"), documents[1]],
        documents[::-1],
    ]
    assert len({base, *(corpus_fingerprint(c) for c in changed)}) == 5


def test_the_shipped_sample_loads():
    documents = load_corpus(SAMPLE_CORPUS)
    assert len(documents) > 400
    assert documents[0].id.startswith("fact-")
