"""The method a run trains with: the `METHOD_KEYS` of its `algo=` file, and for each value that
is not that file's, where it came from. Tasks and presets hold no method keys (a task that has
a method of its own names an algo file with `override /algo:`), so a value differs from the
file's only where the command line, a sweep or an experiment file set it. Every training run
prints the table and logs it as MLflow params (`method.*`); docs/configuration.md states the
rule."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig, OmegaConf

from src.grpo.settings import METHOD_KEYS
from src.tracking.sweep import keyed_overrides
from src.utils.config import plain
from src.utils.resolvers import PROJECT_ROOT

log = logging.getLogger(__name__)
CONFIG_DIR = PROJECT_ROOT / "conf"
DEFAULT_ALGO = "grpo"  # conf/train.yaml's choice


@dataclass(frozen=True)
class MethodRow:
    """One method key: the run's value, the algo file's, and where the run's came from when
    they differ ("" when they agree)."""

    key: str
    value: Any
    file_value: Any
    source: str


@dataclass(frozen=True)
class Method:
    """The algo file a run names, who chose it, and its method keys."""

    algo: str
    chosen_by: str  # "command line", "task=NAME", "experiment=NAME" or "default"
    rows: tuple[MethodRow, ...]

    def changed(self) -> list[MethodRow]:
        """The rows whose value is not the algo file's."""
        return [row for row in self.rows if row.source]

    def params(self) -> dict[str, str]:
        """MLflow params: the algo file, who chose it, and the keys whose value is not its."""
        changed = "; ".join(f"{r.key}={r.value} ({r.source})" for r in self.changed())
        return {
            "method.algo": self.algo,
            "method.chosen_by": self.chosen_by,
            "method.changed": changed or "none",
        }

    def table(self) -> str:
        """The printed table: one line per key, the source beside a value not the file's."""
        width = max(len(row.key) for row in self.rows)
        lines = [f"Method: algo={self.algo} ({self.chosen_by})"]
        for row in self.rows:
            note = (
                f"   <- {row.source}; algo/{self.algo}.yaml: {row.file_value}" if row.source else ""
            )
            lines.append(f"  {row.key:<{width}}  {row.value}{note}")
        return "\n".join(lines)


def run_method(cfg: DictConfig) -> Method:
    """The method `cfg` trains with, its sources read from Hydra's record of the command line
    (outside a Hydra job: the values alone, as the algo file's)."""
    hydra = HydraConfig.get() if HydraConfig.initialized() else None
    choices = dict(hydra.runtime.choices) if hydra else {}
    lines = [str(line) for line in hydra.overrides.task] if hydra else []
    algo = str(choices.get("algo") or DEFAULT_ALGO)
    typed = {key for key, _ in keyed_overrides(lines)}  # what the command line set
    experiment = choices.get("experiment")
    values = plain(cfg.algo)
    own = algo_file(algo) or {}
    rows = []
    for key in METHOD_KEYS:
        value, file_value = values.get(key), own.get(key, values.get(key))
        source = ""
        if value != file_value:
            if f"algo.{key}" in typed:
                source = "command line"
            elif experiment:
                source = f"experiment={experiment}"
            else:
                source = "the config"
        rows.append(MethodRow(key, value, file_value, source))
    return Method(algo, chooser(algo, "algo" in typed, choices), tuple(rows))


def log_method(loggers: list[Any], cfg: DictConfig) -> Method:
    """Print the run's method table and log it as params to every logger that takes them."""
    method = run_method(cfg)
    log.info("%s", method.table())
    for logger in loggers:
        logger.log_hyperparams(method.params())
    return method


def chooser(algo: str, typed: bool, choices: dict[str, Any]) -> str:
    """Who chose the algo file: the command line, the experiment or task file that overrides
    `/algo`, or the default of conf/train.yaml."""
    if typed:
        return "command line"
    for group in ("experiment", "task"):
        name = choices.get(group)
        if name and algo_override(CONFIG_DIR / group / f"{name}.yaml") == algo:
            return f"{group}={name}"
    return "default" if algo == DEFAULT_ALGO else "the config"


def algo_file(name: str, folder: Path = CONFIG_DIR / "algo") -> dict[str, Any] | None:
    """The keys `conf/algo/<name>.yaml` composes to on its own (its `defaults` within the
    group, then its own keys), or None for a file outside conf/ or a defaults entry naming
    another group."""
    path = folder / f"{name}.yaml"
    if not path.is_file():
        return None
    own = plain(OmegaConf.load(path)) or {}
    entries = list(own.pop("defaults", None) or [])
    if "_self_" not in entries:
        entries.append("_self_")  # Hydra's rule: a file's own keys override its defaults
    merged: dict[str, Any] = {}
    for entry in entries:
        base = own if entry == "_self_" else None
        if isinstance(entry, str) and entry != "_self_":
            base = algo_file(entry, folder)
        if base is None:
            return None
        merged.update(base)
    return merged


def algo_override(path: Path) -> str | None:
    """The algo a config file names in its defaults (`- override /algo: NAME`), or None."""
    if not path.is_file():
        return None
    for entry in (plain(OmegaConf.load(path)) or {}).get("defaults") or []:
        if isinstance(entry, dict) and "override /algo" in entry:
            return str(entry["override /algo"])
    return None
