"""The algorithm's keys (`algo.*`): the GRPO settings `AlgoSettings` holds, and its optimizer's
and scheduler's. Each key's type, range and choices, beside the code that reads it;
`src.runs.schema` assembles every folder's table and checks a composed config against them,
and `AlgoSettings` holds its fields to the same declarations. What a key means is said beside
it in conf/algo/grpo.yaml and docs/configuration.md; what cannot work across keys is checked
in `AlgoSettings.check`."""

from __future__ import annotations

import math

from src.grpo.advantages import ESTIMATORS, REWARD_AGGREGATIONS, SCALES
from src.grpo.objective import LOSS_TYPES, RATIO_LEVELS
from src.grpo.policy_losses import POLICY_LOSSES
from src.utils.setting import (
    FLAG,
    OPTIONAL_TEXT,
    TEXT,
    AnyOf,
    Setting,
    choice,
    number,
    whole,
)

DELTA = "the ratio's cap for negative advantages; above 1 + algo.epsilon_high is usual"
NO_CLIP = Setting("float", choices=(math.inf,))  # .inf: that side of the ratio is not clipped

# key -> what it may hold; what each means is said beside it in its config
SETTINGS: dict[str, Setting | AnyOf] = {
    # the group and the objective
    "algo.group_size": whole(2, why="advantages are group-relative"),
    "algo.kl_beta": number(0),
    "algo.epsilon_low": AnyOf(
        (number(0, 1, below=True), NO_CLIP), words="a number in [0, 1), or .inf (no clip)"
    ),
    "algo.epsilon_high": AnyOf((number(0), NO_CLIP), words="a number >= 0, or .inf (no clip)"),
    "algo.loss_type": choice(*LOSS_TYPES),
    "algo.scale_rewards": choice(*SCALES),
    "algo.advantage_estimator": Setting("str", choices=ESTIMATORS),  # the registry's names
    "algo.multi_objective_aggregation": choice(*REWARD_AGGREGATIONS),
    "algo.num_iterations": whole(1, why="updates per rollout"),
    "algo.importance_sampling_level": choice(*RATIO_LEVELS),
    "algo.policy_loss": Setting("str", choices=POLICY_LOSSES),  # the registry's names
    "algo.delta": number(1, above=True, nullable=True, why=DELTA),
    "algo.sapo_temperature_pos": number(0, above=True),
    "algo.sapo_temperature_neg": number(0, above=True),
    "algo.mask_truncated_completions": FLAG,
    "algo.top_entropy_quantile": number(
        0, 1, why="the share of tokens by entropy whose policy term counts; 1.0 keeps all"
    ),
    "algo.top_k_ratio": number(0, 1, above=True),
    "algo.sampling_rounds": whole(1, why="rollouts per step; 1: no dynamic sampling"),
    "algo.ref_model_path": OPTIONAL_TEXT,
    "algo.sampler_is_cap": number(
        1,
        nullable=True,
        why="it caps pi_trainer / pi_sampler, 1 where they agree; null: no correction",
    ),
    # sizes, guards and logging
    "algo.max_grad_norm": number(0, above=True, nullable=True),
    "algo.max_completion_length": whole(1, nullable=True, why="tokens per completion"),
    "algo.samples_every_n_steps": whole(0, why="steps; 0 never logs samples"),
    "algo.skip_zero_advantage": FLAG,
    "algo.max_tokens_per_pass": whole(
        1, nullable=True, why="tokens per pass, e.g. 4096; null: one pass"
    ),
    "algo.max_nonfinite_steps": whole(1, why="non-finite updates in a row before the run stops"),
    "algo.warn_tied_rollouts": whole(0, why="rollouts; 0 never warns"),
    "algo.metric_aliases": Setting("names"),  # {logged name: our metric's name}
    # the optimizers
    "algo.optimizer.lr": number(0, above=True),
    "algo.optimizer.weight_decay": number(0),
    "algo.scheduler.name": TEXT,
    "algo.scheduler.num_warmup_steps": whole(0),
    "algo.scheduler.warmup_ratio": number(0, 1, nullable=True),
    "algo.scheduler.num_training_steps": whole(1, nullable=True, why="null: the run's steps"),
}
