"""The type, range and allowed values of every user-facing setting, checked when the config is
composed, before any data or model loads: a string where a number belongs, a value out of
range or a misspelt choice gets one `error:` line naming the key, the value and what is
allowed. Each config group declares its keys beside its code (`src/<folder>/keys.py`, a
recipe's under `settings_tables`); the run's and the trainer's are declared here, and
`SETTINGS` assembles them all.

A key that a config does not have is not checked (each task composes its own groups); what a
key means is said beside it in its `conf/<group>/*.yaml`.
"""

from __future__ import annotations

import re
from typing import Any

from lightning.pytorch.strategies import StrategyRegistry
from omegaconf import DictConfig, OmegaConf

from src.data import keys as data_keys
from src.evaluation import keys as evaluation_keys
from src.grpo import keys as grpo_keys
from src.model import keys as model_keys
from src.policy import keys as policy_keys
from src.retrieval import keys as retrieval_keys
from src.reward import keys as reward_keys
from src.rollout import keys as rollout_keys
from src.sft import keys as sft_keys
from src.tracking import keys as tracking_keys
from src.utils.config import named_object
from src.utils.errors import ConfigError
from src.utils.setting import (
    FLAG,
    OPTIONAL_TEXT,
    TEXT,
    TEXTS,
    AnyOf,
    Setting,
    choice,
    number,
    whole,
)

MISSING = object()
INTERPOLATION = re.compile(r"\$\{([A-Za-z_][\w.]*)\}")  # ${retrieval.k}: another key's value


DEVICES = AnyOf((whole(1), choice(-1, "auto"), Setting("indices")))
STRATEGY_NAMES = ("auto", *sorted(StrategyRegistry.available_strategies()))
STRATEGY = AnyOf(
    (choice(*STRATEGY_NAMES), Setting("config")),
    words="auto, a Lightning strategy name (ddp, fsdp, ddp_spawn, deepspeed, ...) or a "
    "strategy config with _target_",
)

# Lightning's precision names (its Trainer's `precision`, as its documentation lists them)
PRECISIONS = ("32-true", "bf16-true", "bf16-mixed", "16-true", "16-mixed", "64-true")
PRECISION = AnyOf(
    (
        choice(
            *PRECISIONS,
            "transformer-engine",
            "transformer-engine-float16",
            "32",
            "16",
            "64",
            "bf16",
        ),
        choice(32, 16, 64),
    ),
    words=f"one of Lightning's precisions: {', '.join(PRECISIONS)}, transformer-engine (or 32, 16, 64, bf16)",
)
PIPELINE_STAGES = ("prep", "baseline", "sft", "grpo", "eval")  # src.pipeline's, in order
# key -> what it may hold; the meaning of each is in its config's comment
RUN_SETTINGS: dict[str, Setting | AnyOf] = {
    # the run
    "seed": whole(),
    "dry_run": FLAG,
    "ckpt_path": OPTIONAL_TEXT,
    "epochs": number(0, above=True, nullable=True),
    "keep_freed_memory": FLAG,
    "task_name": TEXT,
    "save_model": OPTIONAL_TEXT,
    "optimized_metric": TEXT,
    "settings_tables": TEXTS,
    "before_grpo.*": Setting("config"),
    # the trainer
    "trainer.max_steps": whole(1, nullable=True),  # null: epochs sets the length
    "trainer.val_check_interval": whole(1, nullable=True),
    "trainer.num_nodes": whole(1),
    "trainer.log_every_n_steps": whole(1),
    "trainer.num_sanity_val_steps": whole(0),
    "trainer.accelerator": choice("cpu", "gpu", "cuda", "auto"),
    "trainer.devices": DEVICES,
    "trainer.strategy": STRATEGY,
    "trainer.precision": PRECISION,
    "trainer.deterministic": FLAG,
    "trainer.enable_model_summary": FLAG,
    "trainer.use_distributed_sampler": FLAG,
    "callbacks.checkpoint.every_n_train_steps": whole(1, nullable=True),
    "callbacks.checkpoint.save_last": FLAG,
    "callbacks.checkpoint.save_top_k": whole(-1),
    "trainer.max_epochs": whole(-1),
    "trainer.check_val_every_n_epoch": whole(1, nullable=True),
    # the stages a task trains before GRPO
    "stages.*.settings_check": OPTIONAL_TEXT,
    # where the run writes (a value resolved only inside a Hydra job, run_dir's, is not checked)
    "paths.*": TEXT,
    # `python -m src.pipeline` (its PipelineSettings)
    "pipeline.stage": choice("all", *PIPELINE_STAGES),
    "pipeline.dir": TEXT,
}
# every folder's table: the run's and trainer's here, each config group's beside its code
SETTINGS: dict[str, Setting | AnyOf] = {
    **RUN_SETTINGS,
    **data_keys.SETTINGS,
    **model_keys.SETTINGS,
    **rollout_keys.SETTINGS,
    **grpo_keys.SETTINGS,
    **sft_keys.SETTINGS,
    **policy_keys.SETTINGS,
    **retrieval_keys.SETTINGS,
    **reward_keys.SETTINGS,
    **evaluation_keys.SETTINGS,
    **tracking_keys.SETTINGS,
}


def all_settings(cfg: DictConfig) -> dict[str, Setting | AnyOf]:
    """`SETTINGS` and the tables the config's task names under `settings_tables` (dotted
    names of `dict[str, Setting]` beside a recipe's code, such as task=char_diffusion's: a
    recipe declares its own keys, and this module names none of them)."""
    found = dict(SETTINGS)
    names = value_at(cfg, "settings_tables")
    for name in [] if names is MISSING or names is None else names:
        found.update(named_object(str(name), "settings_tables", "name a dict of settings"))
    return found


def value_at(cfg: DictConfig, key: str) -> Any:
    """The resolved value of a dotted key, or `MISSING` where the config has no such key."""
    node: Any = cfg
    for part in key.split("."):
        if not OmegaConf.is_dict(node):  # a value, or None, where a section belongs
            return MISSING
        try:
            node = node.get(part, MISSING)  # one lookup: each one resolves interpolations
        except Exception:  # an interpolation that resolves only inside a Hydra job
            return MISSING
        if node is MISSING:
            return MISSING
    return OmegaConf.to_container(node, resolve=True) if OmegaConf.is_config(node) else node


def keys_matching(cfg: DictConfig, pattern: str) -> list[str]:
    """The keys of `cfg` a declared key names: itself, or with `*` standing for any one part
    (`reward.weights.*`: every reward's weight), leaving out `_target_` and `_partial_`."""
    if "*" not in pattern:
        return [pattern]
    head, _, tail = pattern.partition(".*")
    try:  # the names under `head` only: resolving its values would fail on a bad one elsewhere
        node = OmegaConf.select(cfg, head, default=MISSING) if head else MISSING
    except Exception:  # an interpolation that resolves only inside a Hydra job
        return []
    if not OmegaConf.is_dict(node):
        return []
    return [
        key
        for name in node
        if not str(name).startswith("_")  # what builds the object, not a setting
        for key in keys_matching(cfg, f"{head}.{name}{tail}")
        if value_at(cfg, key) is not MISSING
    ]


def declared(key: str, settings: dict[str, Setting | AnyOf]) -> bool:
    """Whether `settings` declares `key`, or keys under it (a section such as
    `sft.optimizer`, whose `lr` and `weight_decay` are declared)."""
    return setting_of(key, settings) is not None or any(
        name.startswith(f"{key}.") for name in settings
    )


def setting_of(
    key: str, settings: dict[str, Setting | AnyOf] | None = None
) -> Setting | AnyOf | None:
    """The declared setting a key falls under, or None when it has none."""
    settings = settings or SETTINGS
    if key in settings:
        return settings[key]
    parts = key.split(".")
    for pattern, setting in settings.items():
        names = pattern.split(".")
        if (
            "*" in pattern
            and len(names) == len(parts)
            and all(name in ("*", part) for name, part in zip(names, parts, strict=True))
        ):
            return setting
    return None


def check_schema(cfg: DictConfig, settings: dict[str, Setting | AnyOf] | None = None) -> None:
    """Raise `ConfigError` for the first key whose value `SETTINGS` (or the task's own
    `settings_tables`) does not allow."""
    for pattern, setting in (settings or all_settings(cfg)).items():
        for key in keys_matching(cfg, pattern):
            value = value_at(cfg, key)
            if value is MISSING or setting.accepts(value):
                continue
            source = interpolated_from(cfg, key)
            named = key if source is None else f"{source} (read as {key})"
            raise ConfigError(f"{named} must be {setting.allowed()}, got {value!r}")


def interpolated_from(cfg: DictConfig, key: str) -> str | None:
    """The key whose value `key` takes when it is a plain interpolation (`query_k:
    ${retrieval.k}`): the key a user set, to name in an error; None otherwise."""
    parent, _, last = key.rpartition(".")
    node = OmegaConf.select(cfg, parent) if parent else cfg
    if not isinstance(node, DictConfig):
        return None
    raw = OmegaConf.to_container(node, resolve=False).get(last)
    found = INTERPOLATION.fullmatch(raw) if isinstance(raw, str) else None
    return found.group(1) if found else None
