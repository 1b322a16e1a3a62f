"""Every value a multirun sweeps is checked before its first job starts.

`python -m src.train -m algo.kl_beta=0.0,abc` would run the first job, then fail the second
at its settings check. Here, when the sweep starts, each value of each swept setting is put
alone into the sweep's config and given the checks a single value has: its declared type,
range and choices (`src.runs.schema.SETTINGS`) and, for `algo.*`, the algorithm's settings
(`AlgoSettings`). A refused value stops the sweep before any job, in one line naming the key,
the value and the sweep, and status 1; so does a value every job shares (`-m seed=1,2
algo.group_size=1`). The sweeper's own counts (`hydra.sweeper.n_trials`, `n_jobs`,
`max_failure_rate`: Optuna's) are checked the same way. Config groups (`algo=grpo,dapo`),
values that only fail together and search spaces a sweeper draws from (Optuna's intervals) are
left to each job's own check.
"""

from __future__ import annotations

import copy
import sys
from typing import Any

from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.experimental.callback import Callback
from omegaconf import DictConfig

from src.grpo.settings import AlgoSettings
from src.runs.schema import MISSING, all_settings, check_schema, setting_of, value_at
from src.utils.config import plain
from src.utils.errors import ConfigError
from src.utils.setting import AnyOf, Setting, number, whole

# the sweeper's settings a search cannot run without (Optuna's; a sweeper without one skips it)
SWEEPER_SETTINGS: dict[str, Setting] = {
    "n_trials": whole(1),  # trials in all
    "n_jobs": whole(1),  # trials launched at once
    "max_failure_rate": number(0, 1),  # the share of failed trials that stops the search
}


class SweptValuesCheck(Callback):
    """The Hydra callback (`conf/hydra/default.yaml`) that checks the swept values first."""

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        try:
            check_sweeper(config)
            check_constant_values(config)
            check_swept_values(config)
        except ConfigError as error:
            # Hydra turns a callback's exception into a warning and runs the sweep anyway: an
            # exit is what stops it before its first job (status 1, the line on stderr)
            sys.stdout.flush()
            raise SystemExit(f"error: {error}") from None


def check_sweeper(config: DictConfig) -> None:
    """Raise `ConfigError` for a sweeper setting with which no search can run (`n_trials=0`
    would end the search with no trial, and then fail asking Optuna for the best one)."""
    sweeper = config.hydra.get("sweeper") or {}
    for name, setting in SWEEPER_SETTINGS.items():
        if name in sweeper and not setting.accepts(sweeper[name]):
            raise ConfigError(
                f"hydra.sweeper.{name} must be {setting.allowed()}, got {sweeper[name]!r}; "
                "no job of the sweep was started"
            )


def check_constant_values(config: DictConfig) -> None:
    """Raise `ConfigError` for a setting every job of the sweep shares that its declaration or
    the algorithm's checks refuse (`-m seed=1,2 algo.group_size=1` would fail every job)."""
    shared = {key: s for key, s in all_settings(config).items() if not key.startswith("paths.")}
    try:
        check_schema(config, shared)  # each job's folders are its own, set when it starts
        AlgoSettings.from_config(plain(config.get("algo")) or {})
    except ConfigError as error:
        raise ConfigError(f"{error} (in every job); no job of the sweep was started") from None


def check_swept_values(config: DictConfig) -> None:
    """Raise `ConfigError` for the first swept value of a setting that its own checks refuse."""
    lines = [str(line) for line in config.hydra.overrides.task]
    settings = all_settings(config)  # with the task's own tables
    for override in OverridesParser.create().parse_overrides(lines):
        if not override.is_sweep_override():
            continue
        key = override.get_key_element().lstrip("+~")
        current = value_at(config, key)
        if current is MISSING or isinstance(current, dict | list):
            continue  # a config group, or a key the config does not have
        try:
            values = list(override.sweep_iterator())
        except Exception:  # an interval or another search space: nothing to list
            continue
        for value in values:
            problem = refusal(config, key, value, settings)
            if problem:
                raise ConfigError(
                    f"{problem} (swept by {override.input_line}); no job of the sweep was started"
                )


def refusal(
    config: DictConfig, key: str, value: Any, settings: dict[str, Setting | AnyOf]
) -> str | None:
    """Why `key=value` alone cannot work under the declared `settings`, or None."""
    setting = setting_of(key, settings)
    if setting is not None and not setting.accepts(value):
        return f"{key} must be {setting.allowed()}, got {value!r}"
    if not key.startswith("algo."):
        return None
    algo = copy.deepcopy(plain(config.algo))
    *sections, name = key.split(".")[1:]
    target = algo
    for part in sections:
        target = target.setdefault(part, {})
    target[name] = value
    try:
        AlgoSettings.from_config(algo)
    except ConfigError as error:
        return str(error)
    return None
