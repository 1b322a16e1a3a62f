"""Measurements made once per machine and read by every process on it.

A choice made by timing (which of two kernels that compute the same thing is faster here) must
come out the same in every process of a machine: two runs of one seed, a run and its
continuation from a checkpoint, a sweep's jobs round alike only if they take the same kernels,
and a timing taken beside another job can come out either way. So the first process that needs
a measurement makes it, under a file lock that makes the others wait, and writes it to
`<folder>/<name>.json` under `machine_key()` (the processor, torch's version and its thread
count, all of which change the timing); every later process reads it.

The folder is $GRPO_MACHINE_CACHE, else $XDG_CACHE_HOME/grpo-lab, else ~/.cache/grpo-lab.
Delete a file there to measure again. Where the folder cannot be written, each process
measures for itself (logged): the choice is a speed, never a result.
"""

from __future__ import annotations

import json
import logging
import os
import platform
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from src.utils.file_lock import exclusive_lock

log = logging.getLogger(__name__)

FOLDER_VARIABLE = "GRPO_MACHINE_CACHE"
_NOT_YET = object()


def folder() -> Path:
    """Where the measurements are kept: $GRPO_MACHINE_CACHE, else the user's cache folder."""
    if os.environ.get(FOLDER_VARIABLE):
        return Path(os.environ[FOLDER_VARIABLE])
    cache = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(cache) / "grpo-lab"


def processor() -> str:
    """The processor's model name, family and model (Linux's /proc/cpuinfo: a virtual machine
    may name only the maker), else what `platform` knows."""
    try:
        found = processor_in(Path("/proc/cpuinfo").read_text())
    except OSError:
        found = None
    return found or platform.processor() or platform.machine()


def processor_in(cpuinfo: str) -> str | None:
    """`NAME (family F, model M)` from the first processor's block of a /proc/cpuinfo text."""
    fields: dict[str, str] = {}
    for line in cpuinfo.splitlines():
        name, _, value = line.partition(":")
        if not name.strip():  # the first processor's block ends
            break
        fields.setdefault(name.strip(), value.strip())
    if "model name" not in fields:
        return None
    family, model = fields.get("cpu family", "?"), fields.get("model", "?")
    return f"{fields['model name']} (family {family}, model {model})"


def machine_key() -> str:
    """What a measurement holds for: the processor, torch's version and its thread count."""
    return f"{processor()} | torch {torch.__version__} | {torch.get_num_threads()} threads"


def measured_once(name: str, measure: Callable[[], Any]) -> Any:
    """The value `measure()` gave on this machine, as `name`: read from its file if a process
    has measured it already, else measured now (under the lock) and written there. The value
    must be JSON (a bool, number or string)."""
    path = folder() / f"{name}.json"
    key = machine_key()
    value: Any = _NOT_YET
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with exclusive_lock(path.with_name(path.name + ".lock")):
            kept = _read(path)
            if key in kept:
                log.info("%s: %r, measured before on this machine (%s)", name, kept[key], path)
                return kept[key]
            value = kept[key] = measure()
            _write(path, kept)
    except OSError as exc:
        log.info("%s: measured for this process only (%s cannot be kept: %s)", name, path, exc)
        if value is _NOT_YET:
            value = measure()
    return value


def _read(path: Path) -> dict[str, Any]:
    if not path.exists():
        return {}
    try:
        kept = json.loads(path.read_text())
    except (ValueError, UnicodeDecodeError):
        kept = None
    if not isinstance(kept, dict):
        log.warning("%s is not a JSON object of measurements: measuring again", path)
        return {}
    return kept


def _write(path: Path, kept: dict[str, Any]) -> None:
    """Written whole beside the file and moved over it, so no reader sees half of it."""
    partial = path.with_name(path.name + ".partial")
    partial.write_text(json.dumps(kept, indent=1, sort_keys=True) + "\n")
    os.replace(partial, path)
