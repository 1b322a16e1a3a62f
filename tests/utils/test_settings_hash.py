"""`settings_hash`: the name the SFT warm start, the stages and the adversarial rounds give a
cache folder. Its format is pinned, so caches written before stay found."""

from __future__ import annotations

from pathlib import Path

from src.utils.config import settings_hash


def test_the_same_settings_in_any_order_have_one_name_and_other_settings_another():
    settings = {"seed": 42, "data": {"b": 1, "a": [1, 2]}, "p": None}
    assert settings_hash(settings) == "e546bbeee255"  # sha256 of the sorted JSON, 12 digits
    assert settings_hash({"p": None, "data": {"a": [1, 2], "b": 1}, "seed": 42}) == "e546bbeee255"
    assert settings_hash({**settings, "seed": 43}) != "e546bbeee255"
    assert settings_hash({"folder": Path("/x")}) == settings_hash({"folder": "/x"})  # by text
