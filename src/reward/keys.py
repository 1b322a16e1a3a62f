"""The rewards' keys (`reward.*`, conf/reward/): their weights, what a failing one does, and each
function's fields. Each key's type, range and choices, beside the code that reads it;
`src.runs.schema` assembles every folder's table and checks a composed config against them."""

from __future__ import annotations

from src.utils.setting import OPTIONAL_TEXT, TEXT, AnyOf, Setting, choice, number, whole

ON_ERROR = ("raise", "zero")  # what a failing reward function does
METRICS = ("f1", "rouge_l", "bleu", "total")  # what an overlap reward scores (reward=overlap)
BACKENDS = ("auto", "embedding", "overlap")  # how the similarity reward compares explanations

# key -> what it may hold; what each means is said beside it in its config
SETTINGS: dict[str, Setting | AnyOf] = {
    # rewards
    "reward.on_error": choice(*ON_ERROR),
    "reward.weights.*": number(),
    "reward.functions.*.batch_size": whole(1),
    "reward.functions.*.metric": choice(*METRICS),
    "reward.functions.*.answer_field": TEXT,
    "reward.functions.*.reference_field": TEXT,
    "reward.functions.*.question_field": TEXT,
    "reward.functions.*.concepts_field": TEXT,
    "reward.functions.*.explanation_field": TEXT,
    "reward.functions.*.prompt_field": OPTIONAL_TEXT,
    "reward.functions.*.max_length": whole(1),
    "reward.functions.*.buffer": whole(1, why="penalised tokens before the limit"),
    "reward.functions.*.penalty": number(0, why="the score at the limit is -penalty"),
    "reward.functions.*.backend": choice(*BACKENDS),
}
