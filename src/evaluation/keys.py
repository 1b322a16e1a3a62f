"""`python -m src.eval`'s keys (`eval.*`, conf/eval/). Each key's type, range and choices, beside
the code that reads it; `src.runs.schema` assembles every folder's table and checks a composed
config against them."""

from __future__ import annotations

from src.data.datamodule import SPLITS
from src.utils.setting import FLAG, OPTIONAL_TEXT, TEXTS, AnyOf, Setting, choice, whole

# key -> what it may hold; what each means is said beside it in its config
SETTINGS: dict[str, Setting | AnyOf] = {
    # evaluation
    "eval.heads": Setting(
        "texts", low=1, nullable=True, why="the heads src.eval scores, such as [base, grpo]"
    ),
    "eval.split": choice(*SPLITS),
    "eval.max_rows": whole(1, nullable=True),
    "eval.batch_size": whole(1),
    "eval.oracle": FLAG,
    "eval.adapters.*": OPTIONAL_TEXT,
    "eval.policy_overrides": Setting("mapping"),
    "eval.output_dir": OPTIONAL_TEXT,
    "eval.extract": Setting("config", nullable=True),
    # room to learn (conf/room/, src/evaluation/sampled.py)
    "room.k": whole(1),
    "room.rows": whole(1),
    "room.splits": TEXTS,
    "room.success": OPTIONAL_TEXT,
    "room.form": OPTIONAL_TEXT,
    "room.batch_size": whole(1),
    "room.in_training": FLAG,
    "room.in_eval": FLAG,
    "room.eval_rows": whole(1, nullable=True),
    "room.seed": whole(),
    # the training run's sampled room (conf/callbacks/default.yaml: `room`), which reads the
    # keys above; declared after them, so a wrong room.* value is named as such
    "callbacks.room.enabled": FLAG,
    "callbacks.room.k": whole(1),
    "callbacks.room.success": OPTIONAL_TEXT,
    "callbacks.room.form": OPTIONAL_TEXT,
    "callbacks.room.extract": Setting("config", nullable=True),
    "callbacks.room.max_rows": whole(1, nullable=True),
    "callbacks.room.batch_size": whole(1),
    "callbacks.room.seed": whole(),
}
