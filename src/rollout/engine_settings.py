"""The vLLM engine's settings (`rollout.*` in conf/rollout/vllm.yaml beside the sampling ones):
how much of the GPU it takes, over how many GPUs, its context, cache and adapter slots. One
checked object, read once from the config's flat keys."""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

from src.utils.errors import ConfigError


@dataclass(frozen=True)
class EngineSettings:
    """Each field is the `rollout.<field>` key of the same name; its comment in
    conf/rollout/vllm.yaml says what it does."""

    gpu_memory_utilization: float = 0.3
    tensor_parallel_size: int = 1
    max_model_len: int | None = None  # None: the prompt's and completion's lengths, or the model's
    enable_prefix_caching: bool = True
    max_lora_rank: int | None = None  # None: the adapter's rank, in a slot vLLM has
    dtype: str = "auto"
    seed: int = 0
    enforce_eager: bool = False
    sleep_between_rollouts: bool = False

    def __post_init__(self) -> None:
        if not 0 < self.gpu_memory_utilization <= 1:
            raise ConfigError(
                "rollout.gpu_memory_utilization must be in (0, 1], got "
                f"{self.gpu_memory_utilization}"
            )
        for key in ("tensor_parallel_size", "max_model_len", "max_lora_rank"):
            value = getattr(self, key)
            if value is not None and value < 1:
                raise ConfigError(f"rollout.{key} must be >= 1, got {value}")

    @classmethod
    def of(cls, keys: dict[str, Any]) -> EngineSettings:
        """The settings from the config's keys; a key that is none of them is named."""
        known = {field.name for field in fields(cls)}
        unknown = sorted(set(keys) - known)
        if unknown:
            raise ConfigError(
                f"rollout.{unknown[0]} is not a setting of rollout=vllm; its engine settings are "
                f"{', '.join(sorted(known))}"
            )
        return cls(**keys)
