"""A part's settings object (`Declared`): built once from the config's keys, each field checked
against the part's declaration, one line per wrong value, unknown and missing keys named."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from src.utils.errors import ConfigError
from src.utils.setting import MARK, TEXTS, Declared, choice, whole


@dataclass(frozen=True)
class Part(Declared):
    SECTION = "part"
    TABLE = {"part.size": whole(1), "part.kind": choice("a", "b"), "part.tag": MARK}

    name: str
    size: int = 2
    kind: str = "a"
    tag: str = "\n"
    free: object = None  # no declaration: not checked


def test_each_field_is_checked_against_its_declaration():
    assert Part("x", size=3, kind="b", tag="</a>").size == 3
    assert Part("x").tag == "\n"  # a line's end is a mark; only an empty one is refused
    for field, value, words in (
        ("size", 0, "part.size must be a whole number >= 1, got 0"),
        ("size", True, "part.size must be a whole number >= 1, got True"),
        ("kind", "c", "part.kind must be one of a, b, got 'c'"),
        ("tag", "", "part.tag must be a non-empty text"),
    ):
        with pytest.raises(ConfigError, match=words):
            Part("x", **{field: value})
    assert Part("x", free=[1, "y"]).free == [1, "y"]


def test_taken_from_removes_its_keys_and_names_a_missing_one():
    keys = {"name": "x", "size": 4, "other": 1}
    assert Part.taken_from(keys) == Part("x", size=4)
    assert keys == {"other": 1}  # left for another part
    with pytest.raises(ConfigError, match="part.name is needed"):
        Part.taken_from({"size": 4})


def test_of_refuses_a_key_that_is_no_field_by_name():
    assert Part.of({"name": "x"}, "the part").kind == "a"
    with pytest.raises(ConfigError, match="part.colour is not a setting of the part; its settings"):
        Part.of({"name": "x", "colour": 1}, "the part")
    assert Part.more_keys() == {"name", "size", "kind", "tag", "free"}


def test_texts_are_a_list_never_a_bare_text():
    assert TEXTS.accepts(["\n", "END"]) and TEXTS.accepts(None)
    assert not TEXTS.accepts("END") and not TEXTS.accepts([""])


def test_a_mapping_of_settings_holds_a_mapping_under_each_name():
    from src.utils.setting import Setting

    mapping = Setting("mapping")
    assert mapping.accepts({}) and mapping.accepts({"question": {"query_source": "question"}})
    assert not mapping.accepts({"question": "question"})  # a name must map to settings
    assert not mapping.accepts("question") and not mapping.accepts(None)
    assert mapping.allowed() == "a mapping of names to settings, such as {question: {k: 1}}"
