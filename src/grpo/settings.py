"""The algorithm's settings (`algo.*`): their names and defaults here, each key's type, range
and choices declared once in `src/grpo/keys.py` (as every folder's keys), their meaning in
`conf/algo/grpo.yaml` (one comment per key) and docs/configuration.md (a test keeps them in
step), and what cannot work across keys in `AlgoSettings.check`. A run builds one
`AlgoSettings` from the composed config (`src.runs.settings.check_settings`, which refuses an
unknown key by name) and hands it to everything that needs a setting: the GRPO module, the KL
reference, the dry run, the run length.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from src.grpo.keys import SETTINGS
from src.grpo.objective import Objective
from src.grpo.policy_losses import LossSettings, settings_read
from src.utils.errors import ConfigError, MissingFileError
from src.utils.setting import Declared

# `algo.*` keys that are not settings of the algorithm: its optimizer and learning-rate schedule
# (Hydra partials, built once by `src.runs.parts.build_run_parts`).
BUILT_KEYS = ("optimizer", "scheduler")

# The settings that make the method (advantage estimator, policy loss, aggregation, clip range,
# KL weight, ratio level, sampling rounds, updates per rollout, ...): an `algo=` file's choice,
# which tasks and presets never set (docs/configuration.md, "Which value wins"). The other
# settings are sizes, guards and logging.
METHOD_KEYS = (
    "advantage_estimator",
    "scale_rewards",
    "multi_objective_aggregation",
    "top_k_ratio",
    "policy_loss",
    "epsilon_low",
    "epsilon_high",
    "delta",
    "sapo_temperature_pos",
    "sapo_temperature_neg",
    "importance_sampling_level",
    "top_entropy_quantile",
    "loss_type",
    "kl_beta",
    "mask_truncated_completions",
    "num_iterations",
    "sampling_rounds",
)


KNOBS = LossSettings()  # the policy losses' knobs' defaults, declared once beside them


@dataclass(frozen=True)
class AlgoSettings(Declared):
    """Every GRPO setting, with TRL's name where TRL has one; docs/configuration.md says what
    each does and docs/objective.md gives the formulas. Each field is held to its `algo.*`
    declaration when built, then `check` refuses what cannot work across keys."""

    SECTION = "algo"
    TABLE = SETTINGS

    group_size: int = 8
    kl_beta: float = 0.0
    epsilon_low: float = KNOBS.epsilon_low
    epsilon_high: float = KNOBS.epsilon_high
    loss_type: str = "grpo"
    scale_rewards: str = "group"
    advantage_estimator: str = "grpo"
    multi_objective_aggregation: str = "sum_then_normalize"
    num_iterations: int = 1
    importance_sampling_level: str = "token"
    policy_loss: str = "clip"
    delta: float | None = KNOBS.delta
    sapo_temperature_pos: float = KNOBS.sapo_temperature_pos
    sapo_temperature_neg: float = KNOBS.sapo_temperature_neg
    mask_truncated_completions: bool = False
    top_entropy_quantile: float = 1.0
    max_grad_norm: float | None = 1.0
    max_completion_length: int | None = None  # None: the sampler's
    samples_every_n_steps: int = 50
    skip_zero_advantage: bool = True
    max_tokens_per_pass: int | None = 4096
    max_nonfinite_steps: int = 3
    sampling_rounds: int = 1
    warn_tied_rollouts: int = 10
    top_k_ratio: float = 1.0
    ref_model_path: str | None = None
    sampler_is_cap: float | None = None
    metric_aliases: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        super().__post_init__()
        self.check()

    @property
    def uses_kl(self) -> bool:
        """Whether the loss has a KL term, and so a reference model is kept."""
        return self.kl_beta > 0

    def knobs(self) -> LossSettings:
        """The policy loss's clip, cap and temperatures, as `src.grpo.policy_losses` reads
        them."""
        return LossSettings(
            **{knob.name: getattr(self, knob.name) for knob in dataclasses.fields(LossSettings)}
        )

    def objective(self, max_completion_length: int | None) -> Objective:
        """What `grpo_loss` computes for these settings (`max_completion_length`: the run's,
        for seq-mean-token-sum-norm)."""
        return Objective(
            loss_type=self.loss_type,
            beta=self.kl_beta,
            max_completion_length=max_completion_length,
            ratio_level=self.importance_sampling_level,
            policy=self.policy_loss,
            knobs=self.knobs(),
        )

    def unread(self) -> list[str]:
        """The policy-loss knobs set away from their defaults that `policy_loss` does not read
        (`algo=cispo algo.epsilon_low=0.9` trains exactly as 0.2): each `algo.<name>`."""
        read = settings_read(self.policy_loss)
        defaults = {f.name: f.default for f in dataclasses.fields(AlgoSettings)}
        return [
            f"algo.{knob.name}"
            for knob in dataclasses.fields(LossSettings)
            if knob.name not in read and getattr(self, knob.name) != defaults[knob.name]
        ]

    @classmethod
    def from_config(cls, algo: dict[str, Any]) -> AlgoSettings:
        """The settings of a plain `algo` mapping (its `BUILT_KEYS` left aside): an unknown key
        is refused with its name and the known ones, a value its declaration does not allow
        with its key and what is allowed."""
        return cls.of({k: v for k, v in algo.items() if k not in BUILT_KEYS}, "the algorithm")

    def check(self) -> None:
        """Raise `ConfigError` for the first pair of settings that cannot work together (each
        one alone is held to its declaration), or a reference model folder that is not
        there."""
        self._check_choices()
        self._check_policy_loss()
        if self.ref_model_path is not None:
            if not self.uses_kl:
                raise ConfigError(
                    "algo.ref_model_path is set but algo.kl_beta is 0: the reference model is "
                    "used only by the KL term; set algo.kl_beta > 0 or drop algo.ref_model_path"
                )
            if not Path(str(self.ref_model_path)).is_dir():
                raise MissingFileError(
                    f"algo.ref_model_path: no saved model folder at {self.ref_model_path}; point "
                    "it to a folder holding a LoRA adapter or a full model (e.g. a run's model/ "
                    "folder)"
                )

    def _check_choices(self) -> None:
        """The named choices that conflict."""
        estimator = self.advantage_estimator
        if estimator != "grpo" and self.scale_rewards != "none":
            raise ConfigError(
                f"algo.scale_rewards={self.scale_rewards} scales the grpo estimator's advantages "
                f"only; with algo.advantage_estimator={estimator} set algo.scale_rewards=none "
                f"(or use algo={estimator}, which does)"
            )
        if self.multi_objective_aggregation == "normalize_then_sum" and estimator != "grpo":
            raise ConfigError(
                "algo.multi_objective_aggregation=normalize_then_sum (GDPO) makes the advantages "
                f"itself; it replaces algo.advantage_estimator={estimator}: set "
                "algo.advantage_estimator=grpo or algo.multi_objective_aggregation="
                "sum_then_normalize"
            )

    def _check_policy_loss(self) -> None:
        """`policy_loss` and the keys that tune it."""
        name, delta = self.policy_loss, self.delta
        if delta is not None and name != "clip":
            raise ConfigError(
                f"algo.delta caps the clipped surrogate's ratio; algo.policy_loss={name} does "
                "not use it: set algo.delta=null or algo.policy_loss=clip"
            )
        if name == "cispo" and not self.epsilon_high >= 1:
            raise ConfigError(
                "algo.policy_loss=cispo caps the importance weight at algo.epsilon_high itself, "
                "not at 1 + epsilon_high, so it must be >= 1 (published: 5.0; algo=cispo sets "
                f"it), got {self.epsilon_high}"
            )


def setting_names() -> list[str]:
    """The names of every setting, in declaration order."""
    return [setting.name for setting in dataclasses.fields(AlgoSettings)]
