"""The GRPO optimizer's and scheduler's keys (`algo.optimizer.*`, `algo.scheduler.*`); the
algorithm's own `algo.*` keys are typed by `AlgoSettings`. Each key's type, range and choices,
beside the code that reads it; `src.runs.schema` assembles every folder's table and checks a
composed config against them."""

from __future__ import annotations

from src.utils.setting import TEXT, AnyOf, Setting, number, whole

# key -> what it may hold; what each means is said beside it in its config
SETTINGS: dict[str, Setting | AnyOf] = {
    # the optimizers
    "algo.optimizer.lr": number(0, above=True),
    "algo.optimizer.weight_decay": number(0),
    "algo.scheduler.name": TEXT,
    "algo.scheduler.num_warmup_steps": whole(0),
}
