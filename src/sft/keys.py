"""The supervised warm start's keys (`sft.*`, conf/sft/). Each key's type, range and choices,
beside the code that reads it; `src.runs.schema` assembles every folder's table and checks a
composed config against them."""

from __future__ import annotations

from src.utils.setting import FLAG, TEXT, AnyOf, Setting, number, whole

# key -> what it may hold; what each means is said beside it in its config
SETTINGS: dict[str, Setting | AnyOf] = {
    "sft.optimizer.lr": number(0, above=True),
    "sft.optimizer.weight_decay": number(0),
    "sft.enabled": FLAG,
    "sft.cache_dir": TEXT,
    "sft.max_steps": whole(0),
    "sft.batch_size": whole(1),
    "sft.check_size": whole(1),
    "sft.check_every_n_steps": whole(1),
    "sft.stop_at_reward": number(nullable=True),
}
