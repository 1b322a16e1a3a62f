"""Loading a saved model folder: a LoRA adapter goes back on its base model, a full folder
replaces the base. One decision for the warm start, the pipeline and `python -m src.eval`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from src.model.char_encoder import char_model_kind
from src.utils.errors import MissingFileError


def saved_model_settings(folder: str | Path) -> dict[str, Any]:
    """The `model.*` settings that load `folder` with the configured model: `adapter_path` for a
    LoRA adapter (the base stays the configured one), the folder itself as `name_or_path`
    for full weights (no builder, no hub fallback, no fresh adapter), or as `checkpoint` for a
    char model's folder (`model=char_diffusion`)."""
    folder = Path(folder)
    if char_model_kind(folder) is not None:
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
        "nor a char model (char_model.json)"
    )
