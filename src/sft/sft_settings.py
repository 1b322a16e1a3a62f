"""The supervised warm start's settings (`sft.*`, conf/sft/): built once from the config's keys
by `runs/parts.py`, right after the settings check, and checked against their declaration
(`src/sft/keys.py`); the warm start and the entry points read the fields, never the config."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from src.sft.keys import SETTINGS
from src.utils.setting import Declared


@dataclass(frozen=True)
class SftSettings(Declared):
    """Each field is the `sft.<field>` key of the same name; its comment in
    conf/sft/default.yaml (or the task's `sft:`) says what it does. `optimizer` is the
    optimizer's config (`_target_`, `_partial_`, its keywords), built where the warm start
    trains."""

    SECTION = "sft"
    TABLE = SETTINGS

    enabled: bool = False
    cache_dir: str = "outputs/cache/sft"
    max_steps: int = 1000
    batch_size: int = 64
    check_size: int = 256
    check_every_n_steps: int = 10
    stop_at_reward: float | None = None
    optimizer: dict[str, Any] = field(default_factory=dict)
