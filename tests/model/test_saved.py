"""One decision for every saved folder: an adapter goes on the configured base, full weights
replace it, anything else is a clear error."""

from __future__ import annotations

import pytest

from src.model.saved import saved_model_settings
from src.utils.errors import MissingFileError


def test_an_adapter_keeps_the_base_and_full_weights_replace_it(tmp_path):
    adapter, full = tmp_path / "adapter", tmp_path / "full"
    adapter.mkdir()
    (adapter / "adapter_config.json").write_text("{}")
    full.mkdir()
    (full / "config.json").write_text("{}")
    assert saved_model_settings(adapter) == {"adapter_path": str(adapter)}
    settings = saved_model_settings(full)
    assert settings["name_or_path"] == str(full)
    assert settings["builder"] is None and settings["lora"] is None
    assert settings["adapter_path"] is None and settings["offline_fallback"] is None


def test_a_folder_without_a_model_is_named(tmp_path):
    with pytest.raises(MissingFileError, match=f"{tmp_path}: neither a LoRA adapter"):
        saved_model_settings(tmp_path)
