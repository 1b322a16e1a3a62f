"""The rewards' keys (`reward.*`, conf/reward/): their weights, what a failing one does, and each
function's fields. Each key's type, range and choices, beside the code that reads it;
`src.runs.schema` assembles every folder's table and checks a composed config against them."""

from __future__ import annotations

from src.utils.setting import OPTIONAL_TEXT, TEXT, AnyOf, Setting, choice, number, whole

ON_ERROR = ("raise", "zero")  # what a failing reward function does

# key -> what it may hold; what each means is said beside it in its config
SETTINGS: dict[str, Setting | AnyOf] = {
    # rewards
    "reward.on_error": choice(*ON_ERROR),
    "reward.weights.*": number(),
    "reward.functions.*.batch_size": whole(1),
    "reward.functions.*.metric": TEXT,
    "reward.functions.*.answer_field": TEXT,
    "reward.functions.*.reference_field": TEXT,
    "reward.functions.*.question_field": TEXT,
    "reward.functions.*.concepts_field": TEXT,
    "reward.functions.*.explanation_field": TEXT,
    "reward.functions.*.prompt_field": OPTIONAL_TEXT,
    "reward.functions.*.max_length": whole(1),
}
