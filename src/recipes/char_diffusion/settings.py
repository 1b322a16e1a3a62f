"""The type, range and allowed values of task=char_diffusion's own keys, beside its code: the
task names this table under `settings_tables`, and `src.runs.schema.check_schema` checks them
as it checks every other key (one `error:` line naming the key, the value and what is
allowed)."""

from __future__ import annotations

from src.utils.setting import TEXT, AnyOf, Setting, number, whole

SETTINGS: dict[str, Setting | AnyOf] = {
    # the task's data and model
    "data.window": whole(1),
    "data.mask_ratio": number(0, 1, above=True, below=True),
    "data.min_span": whole(1),
    "data.max_span": whole(1),
    "data.mask_char": TEXT,
    "model.mask_char": TEXT,
    "policy.mask_char": TEXT,
    "data.source.seed": whole(),
    "model.seed": whole(),
    "data.source.low": whole(),
    "data.source.high": whole(),
    "model.builder.*": whole(0),
    "model.hidden_size": whole(1),
    "model.intermediate_size": whole(1),
    "model.num_heads": whole(1),
    "model.num_layers": whole(1),
    "model.max_length": whole(1),
    "model.dropout": number(0, 1),
    # adversarial rounds of a judge
    "rounds.count": whole(1),
    "rounds.stage": TEXT,
    "rounds.grpo_steps": whole(1),
    "rounds.judge_steps": whole(1),
    "rounds.replay_share": number(0, 1, below=True),
    "rounds.cache_dir": TEXT,
}
