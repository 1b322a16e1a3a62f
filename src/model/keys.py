"""The model's keys (`model.*`, conf/model/): the weights loaded, their dtype, the adapter. Each
key's type, range and choices, beside the code that reads it; `src.runs.schema` assembles every
folder's table and checks a composed config against them."""

from __future__ import annotations

from src.model.precision import DTYPE_NAMES
from src.utils.setting import FLAG, OPTIONAL_TEXT, TEXT, AnyOf, Setting, choice, number, whole

# key -> what it may hold; what each means is said beside it in its config
SETTINGS: dict[str, Setting | AnyOf] = {
    # the model
    "model.name_or_path": TEXT,
    "model.dtype": choice(*DTYPE_NAMES),
    "model.adapter_path": OPTIONAL_TEXT,
    "model.load_in_4bit": FLAG,
    "model.trust_remote_code": FLAG,
    "model.gradient_checkpointing": FLAG,
    "model.lean_activations": FLAG,
    "model.compile": FLAG,
    "model.trained_in_float32": FLAG,
    "model.max_prompt_length": whole(1, nullable=True),
    "model.lora.r": whole(1),
    "model.lora.lora_alpha": number(0, above=True),
    "model.lora.lora_dropout": number(0, 1),
}
