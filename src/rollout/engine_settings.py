"""The vLLM engine's settings (`rollout.*` in conf/rollout/vllm.yaml beside the sampling ones):
how much of the GPU it takes, over how many GPUs, its context, cache and adapter slots. One
object, read once from the config's flat keys and checked against their declaration
(`src/rollout/keys.py`)."""

from __future__ import annotations

from dataclasses import dataclass

from src.rollout.keys import SETTINGS
from src.utils.setting import Declared


@dataclass(frozen=True)
class EngineSettings(Declared):
    """Each field is the `rollout.<field>` key of the same name; its comment in
    conf/rollout/vllm.yaml says what it does."""

    SECTION = "rollout"
    TABLE = SETTINGS

    gpu_memory_utilization: float = 0.3
    tensor_parallel_size: int = 1
    max_model_len: int | None = None  # None: the prompt's and completion's lengths, or the model's
    enable_prefix_caching: bool = True
    max_lora_rank: int | None = None  # None: the adapter's rank, in a slot vLLM has
    dtype: str = "auto"
    seed: int = 0
    enforce_eager: bool = False
    sleep_between_rollouts: bool = False
