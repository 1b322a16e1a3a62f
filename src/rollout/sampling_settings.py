"""The sampling settings every sampler takes (`rollout.*` in conf/rollout/): how long a completion
may be and how each token is chosen. Built once from the config's keys and checked against their
declaration (`src/rollout/keys.py`; `max_completion_length`, which follows
`algo.max_completion_length`, as that key is checked); the samplers read the fields."""

from __future__ import annotations

from dataclasses import dataclass

from src.rollout.keys import SETTINGS
from src.rollout.stops import stop_texts
from src.utils.errors import ConfigError
from src.utils.setting import Declared, whole


@dataclass(frozen=True)
class SamplingSettings(Declared):
    """Each field is the `rollout.<field>` key of the same name; its comment in
    conf/rollout/hf.yaml says what it does. `stop_strings` are read as `stop_texts` reads
    them (a typed \\n is a line end); greedy decoding is asked for per call, not by a
    temperature of 0. `max_completion_length` follows `algo.max_completion_length` and is held
    here to what that key's declaration allows (the run's schema checks it under algo's name,
    so the rollout table does not declare it again)."""

    SECTION = "rollout"
    TABLE = {**SETTINGS, "rollout.max_completion_length": whole(1)}

    max_completion_length: int
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = 0
    repetition_penalty: float = 1.0
    min_completion_length: int = 0
    stop_strings: tuple[str, ...] | None = None

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.min_completion_length > self.max_completion_length:
            raise ConfigError(
                "rollout.min_completion_length must be at most max_completion_length "
                f"({self.max_completion_length}), got {self.min_completion_length}"
            )
        object.__setattr__(self, "stop_strings", tuple(stop_texts(self.stop_strings)))
