"""A key that nothing reads is refused before the run starts, in one line: a key of a section
built whole that its part takes no parameter for (`+rollout.enforce_eager=true` with
`rollout=hf` would otherwise fail as a `TypeError` traceback from the constructor, and
`+trainer.foo=1` only after the data and models had loaded), a top-level key that the command
line adds with `+` (`+rewriter_adapter=DIR` on a task without that key would be recorded in
MLflow as if it had been used, and ignored), and one that `++` sets where no table declares
it and no config interpolates it."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any, Protocol, runtime_checkable

from hydra.core.hydra_config import HydraConfig
from hydra.utils import get_object
from omegaconf import DictConfig, OmegaConf

from src.runs.schema import INTERPOLATION
from src.utils.config import named_object
from src.utils.errors import ConfigError
from src.utils.resolvers import PROJECT_ROOT

# the config sections built whole from their `_target_` (`src.utils.config.build`); `*`: each
# entry of a mapping of parts (a reward's functions, the callbacks, the loggers)
BUILT = (
    "data",
    "rollout",
    "retrieval",
    "model",
    "policy",
    "algo.optimizer",
    "algo.scheduler",
    "trainer",
    "reward",
    "reward.functions.*",
    "callbacks.*",
    "logger.*",
    "before_grpo.*",
)
# sections without `_target_` handed whole, as keywords, to another package's constructor
HANDED_ON = {"model.lora": "peft.LoraConfig"}
# sections the code reads key by key: a key added directly under one is read only if declared
KEYED = ("eval", "room", "sampling", "sft")


def check_read_keys(cfg: DictConfig, sections: tuple[str, ...] = BUILT) -> None:
    """Raise `ConfigError` for the first key of a built section that its target takes no
    parameter for (a target that takes any keyword is not checked here)."""
    for section, node in built_sections(cfg, sections):
        if not OmegaConf.is_dict(node) or "_target_" not in node:
            continue
        parameters = target_parameters(importable(section, str(node["_target_"])))
        if parameters is None:
            continue
        unread = sorted(
            key for key in node if not str(key).startswith("_") and key not in parameters
        )
        if unread:
            name = str(node["_target_"]).rsplit(".", 1)[-1]
            raise ConfigError(
                f"{section}.{unread[0]} is not read by {name}, which {section} builds: remove it "
                f"(its keys: {', '.join(sorted(parameters))})"
            )


def built_sections(cfg: DictConfig, sections: tuple[str, ...]) -> list[tuple[str, Any]]:
    """Each section's dotted name and node (its names only: nothing resolved); a section
    ending in `.*` stands for each entry of the mapping before it."""
    found = []
    for section in sections:
        if not section.endswith(".*"):
            found.append((section, OmegaConf.select(cfg, section, default=None)))
            continue
        parent = OmegaConf.select(cfg, section[:-2], default=None)
        if OmegaConf.is_dict(parent):
            found += [
                (key, OmegaConf.select(cfg, key, default=None))
                for key in (f"{section[:-2]}.{name}" for name in parent)
            ]
    return found


def importable(section: str, target: str) -> str:
    """`target`, where it names something Python can import; else `ConfigError` naming the
    section (a misspelt `_target_` would otherwise fail only when the part is built, after the
    data and models had loaded)."""
    advice = "name a class or function by its module path, e.g. src.rollout.hf.HFSampler"
    named_object(target, f"{section}._target_", advice)
    return target


@runtime_checkable
class ReadsMoreKeys(Protocol):
    """A part that takes any keyword and hands some to its own settings object (the rewriter's
    `RewriterSettings`, `load_causal_lm`'s `ModelSettings`): the keys it reads beyond its and
    its bases' named parameters."""

    @classmethod
    def more_keys(cls) -> set[str]:
        """The keyword names it reads that no `__init__` of its class chain names."""
        ...


def target_parameters(target: str) -> set[str] | None:
    """The keyword parameters the target takes: a function's own, or a class's along its
    chain of `__init__`s (one that takes any keyword hands them on to its base's), with the
    more a `ReadsMoreKeys` target reads (a function declares them as its `more_keys`); None
    where it takes any keyword to the end of the chain without declaring what it reads, or
    cannot be read (building it then says what is wrong)."""
    try:
        found: Any = get_object(target)
    except Exception:  # an unknown target: Hydra's own error names it when the part is built
        return None
    chain = (
        [cls.__init__ for cls in found.__mro__ if "__init__" in vars(cls) and cls is not object]
        if isinstance(found, type)
        else [found]
    )
    kinds = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    declares = isinstance(found, ReadsMoreKeys)
    names = found.more_keys() if declares else set()
    for function in chain:
        try:
            parameters = inspect.signature(function).parameters
        except (TypeError, ValueError):
            return None
        names |= {name for name, p in parameters.items() if p.kind in kinds and name != "self"}
        if not any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values()):
            return names
    return names if declares else None


def check_added_to_section(key: str, declared: Callable[[str], bool], sign: str = "+") -> None:
    """Raise `ConfigError` where `key`, added with `+` (so the config had no such key) or set
    with `++`, falls directly under a section the code reads key by key (`KEYED`) and no
    table declares it (`+eval.k=0`: nothing reads it, and the run would go on as without
    it)."""
    section, _, name = key.partition(".")
    if section in KEYED and name and "." not in name and not declared(key):
        verb = "adds" if sign == "+" else "sets"
        raise ConfigError(
            f"{sign}{key} {verb} a key that nothing reads: {section}'s settings are read by name "
            f"and {name} is none of them; remove it (see conf/{section}/ for its keys)"
        )


def check_added_keys(
    overrides: list[str] | None = None,
    declared: Callable[[str], bool] = lambda key: True,
    interpolated: Callable[[str], bool] = lambda key: True,
) -> None:
    """Raise `ConfigError` for a `+KEY=VALUE` override (the run's own, or `overrides`) that adds
    a top-level key: no config of the run has it, so no config reads it through an
    interpolation, and the code reads only top-level keys its configs define. A config group
    added with `+` (`+experiment=...`, `+model@policy.reader=tiny`) is not a key. A key
    added with `+` directly under a section read key by key must be one `declared` says is
    a setting (`check_added_to_section`). `++KEY=VALUE` (add or override) passes the same
    section check, and a top-level key it sets must be `declared` or one a config
    `interpolated` (`${KEY}`, as a task's `rewriter_adapter`)."""
    if overrides is None:
        overrides = list(HydraConfig.get().overrides.task) if HydraConfig.initialized() else []
    for override in overrides:
        if not override.startswith("+") or "=" not in override:
            continue
        sign = "++" if override.startswith("++") else "+"
        key = override[len(sign) :].split("=", 1)[0]
        check_added_to_section(key, declared, sign)
        if "." in key or "@" in key or (PROJECT_ROOT / "conf" / key).is_dir():
            continue
        if sign == "++":
            if declared(key) or interpolated(key):
                continue
            raise ConfigError(
                f"++{key} sets a key that no setting declares and no config reads: remove it "
                "(python -m src.train --cfg job lists this run's keys)"
            )
        raise ConfigError(
            f"+{key} adds a key that no config of this run has, so nothing reads it: remove it "
            f"(a task that takes {key} sets it without the +)"
        )


def interpolated_roots(cfg: DictConfig) -> set[str]:
    """The top-level keys any value of `cfg` interpolates (`${trainer.max_steps}` -> `trainer`),
    read unresolved, and those `${stage:NAME}` reads (the stages' `checkpoint_key`s, as a
    task's `rewriter_adapter`)."""
    roots = {str(stage.checkpoint_key) for stage in (cfg.get("stages") or {}).values()}
    stack = [OmegaConf.to_container(cfg, resolve=False)]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            stack += node.values()
        elif isinstance(node, list):
            stack += node
        elif isinstance(node, str) and "${" in node:
            roots |= {name.split(".", 1)[0] for name in INTERPOLATION.findall(node)}
    return roots
