"""Loading a saved model folder: a LoRA adapter goes back on its base model, a full folder
replaces the base. One decision for the warm start, the pipeline and `python -m src.eval`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from src.utils.errors import MissingFileError

# What our own (not Hugging Face) networks save beside their weights: their kind and settings,
# as {"kind": ..., "settings": {...}}; named after the first network that wrote one.
KIND_FILE = "char_model.json"


def saved_kind(folder: str | Path) -> str | None:
    """The kind of our own network saved in `folder` (`KIND_FILE`), or None when it holds
    none (a Hugging Face folder, an adapter, nothing)."""
    description = Path(folder) / KIND_FILE
    if not description.is_file():
        return None
    return json.loads(description.read_text()).get("kind")


# The kind a stage (src/pretraining/stages.py) may name for a folder holding a LoRA adapter,
# which Hugging Face's peft writes without a KIND_FILE.
LORA_ADAPTER = "lora_adapter"


def holds(folder: str | Path, kind: str) -> bool:
    """Whether `folder` holds a saved model of `kind`: one of our own networks' kinds, or
    `LORA_ADAPTER` for a peft adapter folder."""
    if kind == LORA_ADAPTER:
        return (Path(folder) / "adapter_config.json").is_file()
    return saved_kind(folder) == kind


def saved_model_settings(folder: str | Path) -> dict[str, Any]:
    """The `model.*` settings that load `folder` with the configured model: `adapter_path` for a
    LoRA adapter (the base stays the configured one), the folder itself as `name_or_path`
    for full weights (no builder, no hub fallback, no fresh adapter), or as `checkpoint` for a
    folder of our own network (`model=char_diffusion`)."""
    folder = Path(folder)
    if saved_kind(folder) is not None:
        return {"checkpoint": str(folder)}
    if (folder / "adapter_config.json").is_file():
        return {"adapter_path": str(folder)}
    if (folder / "config.json").is_file():
        return {
            "name_or_path": str(folder),
            "builder": None,
            "offline_fallback": None,
            "lora": None,
            "adapter_path": None,
        }
    raise MissingFileError(
        f"{folder}: neither a LoRA adapter (adapter_config.json), a model folder (config.json) "
        f"nor one of our own networks ({KIND_FILE})"
    )
