"""`benchmarks/vs_trl.py` on a fresh clone: every configuration's model folder is built by the
path a first run takes (not only found cached), the SmolLM2 conversion called as
`convert_gguf` takes it, and random weights of a shape built from its config alone."""

from __future__ import annotations

import inspect
import json
import sys
from pathlib import Path

import pytest

from src.model.offline import convert_gguf
from src.utils.resolvers import PROJECT_ROOT

sys.path.insert(0, str(PROJECT_ROOT / "benchmarks"))
import vs_trl  # noqa: E402
import vs_trl_common  # noqa: E402


@pytest.fixture
def empty_models(tmp_path, monkeypatch):
    """The benchmark's model folders pointed at an empty folder, as on a fresh clone."""
    models = tmp_path / "models"
    folders = {
        "TINY_FOLDER": models / "tiny_llama_h128_l4",
        "SMOL_FOLDER": models / "smollm2_135m_instruct",
        "SMOL_RANDOM": models / "smollm2_135m_random",
        "SMOL_CONFIG": models / "smollm2_135m_config",
        "GEMMA_FOLDER": models / "gemma3_270m",
        "GEMMA_RANDOM": models / "gemma3_270m_random",
        "GEMMA_CONFIG": models / "gemma3_270m_config",
    }
    for name, folder in folders.items():
        monkeypatch.setattr(vs_trl_common, name, folder)
        if hasattr(vs_trl, name):
            monkeypatch.setattr(vs_trl, name, folder)
    return folders


def test_every_configuration_builds_its_folder_on_a_fresh_clone(empty_models, monkeypatch):
    converted = []

    def conversion(**kwargs):  # the real signature must take the call; no 40 s conversion
        inspect.signature(convert_gguf).bind(**kwargs)
        converted.append(kwargs)
        folder = Path(kwargs["folder"])
        folder.mkdir(parents=True)
        (folder / "config.json").write_text("{}")
        return folder

    monkeypatch.setattr("src.model.offline.convert_gguf", conversion)
    for name, shape in vs_trl_common.SHAPES.items():
        folder = vs_trl.ensure_model_folder(shape)
        assert (folder / "config.json").exists(), name
    assert (empty_models["TINY_FOLDER"] / "model.safetensors").exists()  # built, not faked
    # once per model, then found by the other configurations of the same model
    assert [c["folder"] for c in converted] == [
        str(empty_models["SMOL_FOLDER"]),
        str(empty_models["GEMMA_FOLDER"]),
    ]
    assert converted[1]["chunked"] is True  # Gemma is joined from its chunk packages


def test_random_weights_are_built_from_a_config_alone(empty_models, tiny_lm):
    source = empty_models["SMOL_CONFIG"]
    tiny_lm.network.config.save_pretrained(source)  # a config and tokenizer, no weights
    tiny_lm.tokenizer.save_pretrained(source)
    folder = vs_trl.ensure_model_folder(vs_trl_common.SHAPES["g"], random_weights=True)
    assert folder == empty_models["SMOL_RANDOM"]
    assert json.loads((folder / "config.json").read_text())["hidden_size"] == 128
    assert (folder / "model.safetensors").exists()


def test_random_weights_without_a_config_say_where_it_is_looked_for(empty_models):
    with pytest.raises(SystemExit, match="needs the smollm2_135m config.json and tokenizer"):
        vs_trl.ensure_model_folder(vs_trl_common.SHAPES["g"], random_weights=True)
    with pytest.raises(SystemExit, match=r"needs the gemma3_270m config.json .*gemma3_270m_config"):
        vs_trl.ensure_model_folder(vs_trl_common.SHAPES["i"], random_weights=True)
