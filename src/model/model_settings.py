"""How a causal LM is loaded (`model.*` in conf/model/): its precision, adapter, quantisation
and the passes' options. Built once from the config's keys and checked against their declaration
(`src/model/keys.py`); `load_causal_lm` reads the fields."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from src.model.keys import SETTINGS
from src.utils.setting import Declared


@dataclass(frozen=True)
class ModelSettings(Declared):
    """Each field is the `model.<field>` key of the same name; its comment in
    conf/model/tiny.yaml says what it does. `lora` holds peft's `LoraConfig` arguments (None:
    every weight trains)."""

    SECTION = "model"
    TABLE = SETTINGS

    dtype: str = "float32"
    lora: dict[str, Any] | None = None
    load_in_4bit: bool = False
    trust_remote_code: bool = False
    gradient_checkpointing: bool = False
    max_prompt_length: int | None = None
    adapter_path: str | None = None
    lean_activations: bool = True
    compile: bool = False
    trained_in_float32: bool = True
