"""The algorithm's settings (`algo.*`), declared once: their names, types and defaults here,
their meaning in `conf/algo/grpo.yaml` (one comment per key) and docs/configuration.md (a
test keeps the three in step), and every check of what cannot work in `AlgoSettings.check`.
A run builds one `AlgoSettings` from the composed config (`src.runs.settings.check_settings`,
which refuses an unknown key or a value of the wrong type by name) and hands it to everything
that needs a setting: the GRPO module, the KL reference, the dry run, the run length.
"""

from __future__ import annotations

import dataclasses
import math
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from src.grpo.advantages import ESTIMATORS, REWARD_AGGREGATIONS, SCALES
from src.grpo.objective import LOSS_TYPES, RATIO_LEVELS, Objective
from src.grpo.policy_losses import POLICY_LOSSES, LossSettings, settings_read
from src.utils.errors import ConfigError, MissingFileError

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
class AlgoSettings:
    """Every GRPO setting, with TRL's name where TRL has one; docs/configuration.md says what
    each does and docs/objective.md gives the formulas."""

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
        or a value of the wrong type is refused with its name and what is allowed."""
        hints = typing.get_type_hints(cls)
        values = {}
        for name, value in algo.items():
            if name in BUILT_KEYS:
                continue
            if name not in hints:
                known = ", ".join(sorted(hints))
                raise ConfigError(f"algo.{name} is not a setting of the algorithm; known: {known}")
            values[name] = _typed(name, value, hints[name])
        settings = cls(**values)
        settings.check()
        return settings

    def check(self) -> None:
        """Raise `ConfigError` for the first setting that cannot work, naming its key."""
        if self.group_size < 2:
            raise ConfigError(
                f"algo.group_size must be >= 2 (advantages are group-relative), got {self.group_size}"
            )
        if self.kl_beta < 0:
            raise ConfigError(f"algo.kl_beta must be >= 0, got {self.kl_beta}")
        low, high = self.epsilon_low, self.epsilon_high
        if not (0 <= low < 1 or low == math.inf) or high < 0:
            raise ConfigError(
                "algo.epsilon_low must be in [0, 1) and algo.epsilon_high >= 0 (the ratio is "
                "clipped to [1 - epsilon_low, 1 + epsilon_high]; .inf for both turns clipping "
                f"off), got {low} and {high}"
            )
        self._check_counts()
        self._check_choices()
        self._check_policy_loss()
        if self.sampler_is_cap is not None and not self.sampler_is_cap >= 1:
            raise ConfigError(
                f"algo.sampler_is_cap must be >= 1 (it caps pi_trainer / pi_sampler, 1 when they "
                f"agree) or null for no correction, got {self.sampler_is_cap}"
            )
        if not 0 <= self.top_entropy_quantile <= 1:
            raise ConfigError(
                "algo.top_entropy_quantile must be in [0, 1] (the share of tokens by entropy "
                f"whose policy term counts; 1.0 keeps all), got {self.top_entropy_quantile}"
            )
        if not 0 < self.top_k_ratio <= 1:
            raise ConfigError(f"algo.top_k_ratio must be in (0, 1], got {self.top_k_ratio}")
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

    def _check_counts(self) -> None:
        """The whole numbers: each at least its smallest sensible value."""
        least = {
            "num_iterations": (1, "updates per rollout"),
            "max_nonfinite_steps": (1, "non-finite updates in a row before the run stops"),
            "sampling_rounds": (1, "rollouts per step; 1: no dynamic sampling"),
            "warn_tied_rollouts": (0, "rollouts; 0 never warns"),
            "samples_every_n_steps": (0, "steps; 0 never logs samples"),
            "max_completion_length": (1, "tokens per completion"),
            "max_tokens_per_pass": (1, "tokens per pass, e.g. 4096; null: one pass"),
        }
        for name, (smallest, unit) in least.items():
            value = getattr(self, name)
            if value is not None and value < smallest:
                raise ConfigError(f"algo.{name} must be >= {smallest} ({unit}), got {value}")

    def _check_choices(self) -> None:
        """The named choices: each one of its registry's names, and the pairs that conflict."""
        choices = {
            "loss_type": LOSS_TYPES,
            "scale_rewards": SCALES,
            "importance_sampling_level": RATIO_LEVELS,
            "advantage_estimator": tuple(sorted(ESTIMATORS)),
            "multi_objective_aggregation": REWARD_AGGREGATIONS,
            "policy_loss": tuple(sorted(POLICY_LOSSES)),
        }
        for name, allowed in choices.items():
            if getattr(self, name) not in allowed:
                raise ConfigError(
                    f"algo.{name} must be one of {allowed}, got {getattr(self, name)!r}"
                )
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
        if delta is not None and not delta > 1:
            raise ConfigError(
                f"algo.delta must be > 1 (the cap of the ratio for negative advantages; above "
                f"1 + algo.epsilon_high is usual) or null, got {delta}"
            )
        if name == "cispo" and not self.epsilon_high >= 1:
            raise ConfigError(
                "algo.policy_loss=cispo caps the importance weight at algo.epsilon_high itself, "
                "not at 1 + epsilon_high, so it must be >= 1 (published: 5.0; algo=cispo sets "
                f"it), got {self.epsilon_high}"
            )
        temperatures = (self.sapo_temperature_pos, self.sapo_temperature_neg)
        if not all(t > 0 for t in temperatures):
            raise ConfigError(
                "algo.sapo_temperature_pos and algo.sapo_temperature_neg must be > 0, got "
                f"{temperatures[0]} and {temperatures[1]}"
            )


def setting_names() -> list[str]:
    """The names of every setting, in declaration order."""
    return [setting.name for setting in dataclasses.fields(AlgoSettings)]


def _typed(name: str, value: Any, annotation: Any) -> Any:
    """`value` as the declared type of setting `name` (an int is a float too; a bool is not a
    number), or `ConfigError` naming the key, the value and the type."""
    options = typing.get_args(annotation) if _is_union(annotation) else (annotation,)
    for option in options:
        if option is type(None) and value is None:
            return None
        if option is bool and isinstance(value, bool):
            return value
        if option is int and isinstance(value, int) and not isinstance(value, bool):
            return value
        if option is float and isinstance(value, int | float) and not isinstance(value, bool):
            return float(value)
        if option is str and isinstance(value, str):
            return value
        if (
            typing.get_origin(option) is dict
            and isinstance(value, dict)
            and all(isinstance(k, str) and isinstance(v, str) for k, v in value.items())
        ):
            return dict(value)
    wanted = " or ".join(_type_name(option) for option in options)
    raise ConfigError(f"algo.{name} must be {wanted}, got {value!r}")


def _is_union(annotation: Any) -> bool:
    return typing.get_origin(annotation) in (typing.Union, types.UnionType)


def _type_name(option: Any) -> str:
    names = {int: "a whole number", float: "a number", bool: "true or false", str: "a name"}
    if option is type(None):
        return "null"
    if typing.get_origin(option) is dict:
        return "a mapping of names to names"
    return names.get(option, str(option))
