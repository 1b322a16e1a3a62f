"""The type, range and allowed values of every user-facing setting outside `algo.*` (whose
settings `AlgoSettings` types), declared in one table and checked when the config is composed,
before any data or model loads: a string where a number belongs, a value out of range or a
misspelt choice gets one `error:` line naming the key, the value and what is allowed.

A key that a config does not have is not checked (each task composes its own groups); what a
key means is said beside it in its `conf/<group>/*.yaml`.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any

from hydra.utils import get_object
from lightning.pytorch.strategies import StrategyRegistry
from omegaconf import DictConfig, OmegaConf

from src.data.datamodule import SPLITS
from src.model.causal_lm import DTYPES
from src.policy.generator import CHAT_TEMPLATE_CHOICES
from src.policy.rewriter_settings import ANSWER_MODES, QUERY_SOURCES
from src.retrieval.retriever import BACKENDS
from src.reward.combine import ON_ERROR
from src.utils.errors import ConfigError

INDEX_TEXT = re.compile(r"\s*\d+\s*(,\s*\d+\s*)*,?\s*")  # "0,1" or "0,": device indices
MISSING = object()
INTERPOLATION = re.compile(r"\$\{([A-Za-z_][\w.]*)\}")  # ${retrieval.k}: another key's value


@dataclass(frozen=True)
class Setting:
    """What one key may hold: a `kind` (`int`, `float`, `bool`, `str`; `indices`, device
    indices as a list or as text with commas; `config`, an object's config with `_target_`),
    an inclusive range (`low`, `high`; `above` makes `low` exclusive, `below` makes `high`
    exclusive), a set of `choices`, and whether null is allowed."""

    kind: str
    low: float | None = None
    high: float | None = None
    above: bool = False
    below: bool = False  # `high` is exclusive
    choices: tuple[Any, ...] | None = None
    nullable: bool = False
    blank: bool = False  # a text may be empty

    def allowed(self) -> str:
        """What the key may hold, in words."""
        if self.choices is not None:
            words = "one of " + ", ".join(str(choice) for choice in self.choices)
        else:
            words = {
                "int": "a whole number",
                "float": "a number",
                "bool": "true or false",
                "str": "a text",
                "indices": "device indices (a list, or text such as 0,1)",
                "config": "a config with _target_",
            }[self.kind]
            if self.low is not None and self.high is not None:
                words += (
                    f" in {'(' if self.above else '['}{self.low}, {self.high}"
                    f"{')' if self.below else ']'}"
                )
            elif self.low is not None:
                words += f" {'>' if self.above else '>='} {self.low}"
            elif self.high is not None:
                words += f" <= {self.high}"
        return words + (" or null" if self.nullable else "")

    def accepts(self, value: Any) -> bool:
        """Whether `value` is of this kind, in range and among the choices."""
        if value is None:
            return self.nullable
        if self.choices is not None:
            return any(value == choice and type(value) is type(choice) for choice in self.choices)
        if self.kind == "bool":
            return isinstance(value, bool)
        if self.kind == "str":
            return isinstance(value, str) and (self.blank or bool(value.strip()))
        if self.kind == "indices":
            if isinstance(value, list | tuple):
                return bool(value) and all(
                    isinstance(index, int) and not isinstance(index, bool) and index >= 0
                    for index in value
                )
            return isinstance(value, str) and "," in value and bool(INDEX_TEXT.fullmatch(value))
        if self.kind == "config":
            return isinstance(value, dict) and bool(value.get("_target_"))
        if isinstance(value, bool) or not isinstance(value, int | float):
            return False
        if self.kind == "int" and not isinstance(value, int):
            return False
        if not math.isfinite(value):
            return False
        if self.low is not None and (value <= self.low if self.above else value < self.low):
            return False
        return self.high is None or (value < self.high if self.below else value <= self.high)


@dataclass(frozen=True)
class AnyOf:
    """A key that may hold any of several settings' values (`trainer.devices`: a count, -1,
    "auto" or device indices); `words` says it in short where the options' own words are
    long."""

    options: tuple[Setting, ...]
    words: str | None = None
    kind: str = "any"
    choices: tuple[Any, ...] | None = None

    def allowed(self) -> str:
        return self.words or " or ".join(option.allowed() for option in self.options)

    def accepts(self, value: Any) -> bool:
        return any(option.accepts(value) for option in self.options)


def whole(low: float | None = None, **more: Any) -> Setting:
    return Setting("int", low=low, **more)


def number(low: float | None = None, high: float | None = None, **more: Any) -> Setting:
    return Setting("float", low=low, high=high, **more)


def choice(*choices: Any, nullable: bool = False) -> Setting:
    return Setting("str", choices=choices, nullable=nullable)


FLAG = Setting("bool")
TEXT = Setting("str")
OPTIONAL_TEXT = Setting("str", nullable=True)
ANY_TEXT = Setting("str", blank=True)  # a template part or prefix that may be empty
DEVICES = AnyOf((whole(1), choice(-1, "auto"), Setting("indices")))
STRATEGY_NAMES = ("auto", *sorted(StrategyRegistry.available_strategies()))
STRATEGY = AnyOf(
    (choice(*STRATEGY_NAMES), Setting("config")),
    words="auto, a Lightning strategy name (ddp, fsdp, ddp_spawn, deepspeed, ...) or a "
    "strategy config with _target_",
)

# key -> what it may hold; the meaning of each is in its config's comment
SETTINGS: dict[str, Setting | AnyOf] = {
    # the run
    "seed": whole(),
    "dry_run": FLAG,
    "ckpt_path": OPTIONAL_TEXT,
    "epochs": number(0, above=True, nullable=True),
    "keep_freed_memory": FLAG,
    "task_name": TEXT,
    # data
    "data.path": OPTIONAL_TEXT,
    "data.val_path": OPTIONAL_TEXT,
    "data.val_size": whole(0),
    "data.max_val_rows": whole(1, nullable=True),
    "data.batch_size": whole(1),
    "data.eval_batch_size": whole(1),
    "data.seed": whole(),
    # the trainer
    "trainer.max_steps": whole(1, nullable=True),  # null: epochs sets the length
    "trainer.val_check_interval": whole(1, nullable=True),
    "trainer.num_nodes": whole(1),
    "trainer.log_every_n_steps": whole(1),
    "trainer.num_sanity_val_steps": whole(0),
    "trainer.accelerator": choice("cpu", "gpu", "cuda", "auto"),
    "trainer.devices": DEVICES,
    "trainer.strategy": STRATEGY,
    "trainer.precision": TEXT,
    "trainer.deterministic": FLAG,
    "trainer.enable_model_summary": FLAG,
    "trainer.use_distributed_sampler": FLAG,
    # the model
    "model.name_or_path": TEXT,
    "model.dtype": choice(*DTYPES),
    "model.adapter_path": OPTIONAL_TEXT,
    "model.load_in_4bit": FLAG,
    "model.trust_remote_code": FLAG,
    "model.gradient_checkpointing": FLAG,
    "model.lean_activations": FLAG,
    "model.compile": FLAG,
    "model.max_prompt_length": whole(1, nullable=True),
    "model.lora.r": whole(1),
    "model.lora.lora_alpha": number(0, above=True),
    "model.lora.lora_dropout": number(0, 1),
    # sampling
    "rollout.temperature": number(0, above=True),
    "rollout.top_p": number(0, 1, above=True),
    "rollout.top_k": whole(0),
    "rollout.repetition_penalty": number(0, above=True),
    "rollout.min_completion_length": whole(0),
    "rollout.fused_steps": FLAG,
    "rollout.packed_weights": FLAG,
    # the optimizers
    "algo.optimizer.lr": number(0, above=True),
    "algo.optimizer.weight_decay": number(0),
    "algo.scheduler.name": TEXT,
    "algo.scheduler.num_warmup_steps": whole(0),
    "sft.optimizer.lr": number(0, above=True),
    "sft.optimizer.weight_decay": number(0),
    # the supervised warm start
    "sft.enabled": FLAG,
    "sft.max_steps": whole(0),
    "sft.batch_size": whole(1),
    "sft.check_size": whole(1),
    "sft.check_every_n_steps": whole(1),
    "sft.stop_at_reward": number(nullable=True),
    # the policy role
    "policy.template": TEXT,
    "policy.sft_target": ANY_TEXT,
    "policy.response_prefix": ANY_TEXT,
    "policy.plan_prefix": ANY_TEXT,
    "policy.plan_template": TEXT,
    "policy.answer_template": TEXT,
    "policy.document_template": TEXT,
    "policy.passage_template": TEXT,
    "policy.planner.max_completion_length": whole(1),
    "policy.answerer.max_completion_length": whole(1),
    "policy.system_prompt": OPTIONAL_TEXT,
    "policy.use_chat_template": Setting("str", choices=CHAT_TEMPLATE_CHOICES),
    "policy.num_queries": whole(1),
    "policy.query_k": whole(1),
    "policy.k": whole(1),
    "policy.rank_depth": whole(1),
    "policy.query_source": choice(*QUERY_SOURCES),
    "policy.answer_mode": choice(*ANSWER_MODES),
    "policy.frozen_batch_size": whole(1),
    "policy.reader": Setting("config", nullable=True),
    # retrieval
    "retrieval.k": whole(1),
    "retrieval.backend": choice(*BACKENDS),
    "retrieval.bm25.k1": number(0),
    "retrieval.bm25.b": number(0, 1),
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
    # evaluation
    "eval.split": choice(*SPLITS),
    "eval.max_rows": whole(1, nullable=True),
    "eval.batch_size": whole(1),
    # tracking and checkpoints
    "logger.mlflow.experiment_name": TEXT,
    "logger.mlflow.retry_after_s": number(0),
    "logger.mlflow.http_retries": whole(0),
    "logger.mlflow.http_timeout_s": number(0, above=True),
    "callbacks.checkpoint.every_n_train_steps": whole(1, nullable=True),
    "callbacks.checkpoint.save_last": FLAG,
    "callbacks.checkpoint.save_top_k": whole(-1),
    "logger.mlflow.run_name": OPTIONAL_TEXT,
    "logger.mlflow.log_model": FLAG,
    "trainer.max_epochs": whole(-1),
    "trainer.check_val_every_n_epoch": whole(1, nullable=True),
    # where the run writes (a value resolved only inside a Hydra job, run_dir's, is not checked)
    "paths.*": TEXT,
}


def all_settings(cfg: DictConfig) -> dict[str, Setting | AnyOf]:
    """`SETTINGS` and the tables the config's task names under `settings_tables` (dotted
    names of `dict[str, Setting]` beside a recipe's code, such as task=char_diffusion's: a
    recipe declares its own keys, and this module names none of them)."""
    found = dict(SETTINGS)
    names = value_at(cfg, "settings_tables")
    for name in [] if names is MISSING or names is None else names:
        try:
            table = get_object(str(name))
        except (ImportError, AttributeError, ValueError) as error:
            raise ConfigError(
                f"settings_tables: cannot import {name} ({error}); name a dict of settings"
            ) from None
        found.update(table)
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
    node = value_at(cfg, head) if head else MISSING
    if not isinstance(node, dict):
        return []
    return [
        key
        for name in node
        if not str(name).startswith("_")  # what builds the object, not a setting
        for key in keys_matching(cfg, f"{head}.{name}{tail}")
        if value_at(cfg, key) is not MISSING
    ]


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
