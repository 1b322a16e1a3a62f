"""The data's keys (`data.*`, conf/data/): the rows read, the held-out split and the batches. Each
key's type, range and choices, beside the code that reads it; `src.runs.schema` assembles every
folder's table and checks a composed config against them."""

from __future__ import annotations

from src.utils.setting import FLAG, OPTIONAL_TEXT, TEXTS, AnyOf, Setting, choice, number, whole

# key -> what it may hold; what each means is said beside it in its config
SETTINGS: dict[str, Setting | AnyOf] = {
    # data
    "data.path": OPTIONAL_TEXT,
    "data.val_path": OPTIONAL_TEXT,
    "data.val_size": whole(0),
    "data.schema.label_base": Setting(
        "int", choices=(0, 1)
    ),  # 0: the hub's labels, 1: labelled 1-4
    "data.unseen.path": OPTIONAL_TEXT,
    "data.unseen.corpus": OPTIONAL_TEXT,
    "data.unseen.kinds": TEXTS,
    "data.max_val_rows": whole(1, nullable=True),
    "data.batch_size": whole(1),
    "data.eval_batch_size": whole(1),
    "data.seed": whole(),
    "data.oracle_share": number(0, 1),
    "data.shuffle_options": FLAG,
    "data.required_fields": TEXTS,
    # sampling (conf/sampling/): how training prompts are drawn (src/data/learnability.py)
    "sampling.order": choice("uniform", "learnability"),
    "sampling.uniform_share": number(0, 1),
    "sampling.decay": number(0, 1, below=True),
    "sampling.unknown": number(0, 0.25, above=True),
}
