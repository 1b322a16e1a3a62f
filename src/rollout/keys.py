"""The sampler's keys (`rollout.*`, conf/rollout/): how completions are drawn. Each key's type,
range and choices, beside the code that reads it; `src.runs.schema` assembles every folder's table
and checks a composed config against them."""

from __future__ import annotations

from src.utils.setting import FLAG, TEXT, AnyOf, Setting, number, whole

# key -> what it may hold; what each means is said beside it in its config
SETTINGS: dict[str, Setting | AnyOf] = {
    # sampling
    "rollout.temperature": number(0, above=True),
    "rollout.top_p": number(0, 1, above=True),
    "rollout.top_k": whole(0),
    "rollout.repetition_penalty": number(0, above=True),
    "rollout.min_completion_length": whole(0),
    "rollout.stop_strings": Setting("texts", nullable=True, why="such as [END] or ['\\n']"),
    "rollout.fused_steps": FLAG,
    "rollout.packed_weights": FLAG,
    # the vLLM engine (rollout=vllm)
    "rollout.gpu_memory_utilization": number(0, 1, above=True),
    "rollout.tensor_parallel_size": whole(1),
    "rollout.max_model_len": whole(1, nullable=True),
    "rollout.enable_prefix_caching": FLAG,
    "rollout.max_lora_rank": whole(1, nullable=True),
    "rollout.dtype": TEXT,
    "rollout.seed": whole(),
    "rollout.enforce_eager": FLAG,
    "rollout.sleep_between_rollouts": FLAG,
}
