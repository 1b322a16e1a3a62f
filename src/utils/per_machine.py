"""Measurements made once per machine and read by every process on it.

A choice made by timing (which of two kernels that compute the same thing is faster here) must
come out the same in every process of a machine: two runs of one seed, a run and its
continuation from a checkpoint, a sweep's jobs round alike only if they take the same kernels,
and a timing taken beside another job can come out either way. So the first process that needs
a measurement makes it, under a file lock that makes the others wait, and writes it to
`<folder>/<name>.json` under `machine_key()` (the processor, torch's version and its thread
count, all of which change the timing); every later process reads it.

A measurement may return a `Verdict`: its value, whether the timings decide it beyond doubt,
and the timings. Only a clear verdict is kept, with its date and timings; one whose timings
overlap, or that was timed while the machine was busy, holds for this process only, and the
next process times again. Every choice a process made is in `choices()`, with where it came
from, for the run's start-up lines, its MLflow params and the dry-run report.

The folder is $GRPO_MACHINE_CACHE, else $XDG_CACHE_HOME/grpo-lab, else ~/.cache/grpo-lab.
Delete a file there to measure again (or run `benchmarks/fast_paths.py --retime`). Where the
folder cannot be written, each process measures for itself (logged): the choice is a speed,
never a result.

A choice may be pinned instead (`pin`): a run continued from a checkpoint takes the choices
the run it continues made (its checkpoints hold them), so that it ends where the run would have
ended even when the machine was busy when either of them started; and $GRPO_MACHINE_CHOICES
names a JSON file of `{name: value}` that a run takes as its choices (another run's
`machine_choices` from a checkpoint, to make two runs take the same kernels).
"""

from __future__ import annotations

import json
import logging
import os
import platform
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from src.utils.errors import ConfigError
from src.utils.file_lock import exclusive_lock

log = logging.getLogger(__name__)

FOLDER_VARIABLE = "GRPO_MACHINE_CACHE"
PIN_VARIABLE = "GRPO_MACHINE_CHOICES"  # a JSON file of {name: value}: this process's choices
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
    fields = first_processor(cpuinfo)
    if "model name" not in fields:
        return None
    family, model = fields.get("cpu family", "?"), fields.get("model", "?")
    return f"{fields['model name']} (family {family}, model {model})"


def first_processor(cpuinfo: str) -> dict[str, str]:
    """The fields of the first processor's block of a /proc/cpuinfo text (`model name`,
    `cpu family`, `flags`, ...)."""
    fields: dict[str, str] = {}
    for line in cpuinfo.splitlines():
        name, _, value = line.partition(":")
        if not name.strip():  # the first processor's block ends
            break
        fields.setdefault(name.strip(), value.strip())
    return fields


def machine_key() -> str:
    """What a measurement holds for: the processor, torch's version and its thread count."""
    return f"{processor()} | torch {torch.__version__} | {torch.get_num_threads()} threads"


@dataclass(frozen=True)
class Verdict:
    """A timed choice: its `value` (JSON), whether the timings decide it beyond doubt
    (`clear`; only a clear verdict is kept for the machine), the timings it came from
    (seconds, by name) and, when not clear, why (`doubt`)."""

    value: Any
    clear: bool
    timings: dict[str, float] = field(default_factory=dict)
    doubt: str = ""


# every choice this process made: name -> value, where it came from, its date and timings
_CHOICES: dict[str, dict[str, Any]] = {}


def choices() -> dict[str, dict[str, Any]]:
    """Every per-machine choice this process has made, by name: `value`, `source` (`kept`,
    `measured now and kept`, or `measured now, not kept: <why>`), `measured_at` and
    `timings`."""
    return {name: dict(choice) for name, choice in _CHOICES.items()}


def choice_descriptions() -> dict[str, str]:
    """Each choice this process made, by name, in words: its value, where it came from, when,
    and the timings behind it (what the start-up lines, reports and MLflow params show)."""
    return {name: describe(choice) for name, choice in sorted(_CHOICES.items())}


def choice_lines() -> list[str]:
    """One line per choice this process made, `name: description`, for reports."""
    return [f"{name}: {text}" for name, text in choice_descriptions().items()]


def describe(choice: dict[str, Any]) -> str:
    """A choice in words: `True (kept at 2026-11-28 12:00:00; mkl 4100 us, onednn 5200 us)`."""
    timings = ", ".join(
        f"{part} {1e6 * seconds:.0f} us" for part, seconds in choice["timings"].items()
    )
    when = f" at {choice['measured_at']}" if choice.get("measured_at") else ""
    return (
        f"{choice['value']!r} ({choice['source']}{when}" + (f"; {timings}" if timings else "") + ")"
    )


def machine_busy(share: float = 0.25, window: float = 0.25) -> str:
    """Why the machine is too busy to time on ('' when it is not): over `window` seconds now,
    the other processes kept more than `share` of its processors busy (Linux's /proc/stat,
    less this process's own time), so that another job holding one core of two is seen, and
    the load a run of ours just left behind is not. Where /proc/stat cannot be read, ''."""
    try:
        ticks = os.sysconf("SC_CLK_TCK")
        start, own = _busy_ticks(), time.process_time()
        time.sleep(window)
        spent = (_busy_ticks() - start) / ticks - (time.process_time() - own)
    except (OSError, ValueError, AttributeError):
        return ""
    processors = os.cpu_count() or 1
    others = max(spent, 0.0) / window
    if others > share * processors:
        return f"other processes kept {others:.1f} of {processors} processors busy"
    return ""


def _busy_ticks() -> int:
    """The processors' busy time since boot, in clock ticks (/proc/stat's first line, less
    idle and waiting)."""
    fields = [int(value) for value in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    return sum(fields[:8]) - fields[3] - fields[4]


# choices taken as given, whatever is kept or measured: name -> (value, where from)
_PINNED: dict[str, tuple[Any, str]] = {}


def pin(values: dict[str, Any], source: str) -> None:
    """Make this process take `values` ({name: value}) for those choices, said to come from
    `source`, instead of reading or measuring them."""
    _PINNED.update({name: (value, source) for name, value in values.items()})


def unpin() -> None:
    """Forget every pinned choice (a process that runs several runs, such as the tests)."""
    _PINNED.clear()


def unused_pins() -> dict[str, str]:
    """The pinned choices this process never asked for, by name, with where each was pinned
    from: a file of another machine's or model's shapes pins nothing here."""
    return {name: source for name, (_, source) in sorted(_PINNED.items()) if name not in _CHOICES}


def chosen_values() -> dict[str, Any]:
    """The value of every choice this process made, by name (`choices()` without where each
    came from): what a checkpoint keeps so that a continuation takes the same (`pin`)."""
    return {name: choice["value"] for name, choice in sorted(_CHOICES.items())}


def pin_from_environment() -> None:
    """Pin the choices of the JSON file $GRPO_MACHINE_CHOICES names, where it names one; a file
    that cannot be read as `{name: value}` is one line naming it."""
    path = os.environ.get(PIN_VARIABLE)
    if not path:
        return
    try:
        values = json.loads(Path(path).read_text())
    except (OSError, ValueError) as error:
        raise ConfigError(f"${PIN_VARIABLE}={path}: cannot be read as JSON ({error})") from None
    if not isinstance(values, dict):
        raise ConfigError(f"${PIN_VARIABLE}={path}: holds no {{name: value}} object")
    pin(values, f"pinned by ${PIN_VARIABLE}={path}")


def measured_once(name: str, measure: Callable[[], Any]) -> Any:
    """The value `measure()` gave on this machine, as `name`: the pinned one where it is pinned
    (`pin`), else read from its file if a process has kept it already, else measured now (under
    the lock) and, when it is clear (a plain value, or a clear `Verdict`), written there with
    its date and timings. The value must be JSON (a bool, number or string)."""
    if name in _PINNED:
        value, source = _PINNED[name]
        _note(name, {"value": value}, source)
        return value
    path = folder() / f"{name}.json"
    key = machine_key()
    found: Any = _NOT_YET
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with exclusive_lock(path.with_name(path.name + ".lock")):
            kept = _read(path)
            if key in kept:
                entry = _as_entry(kept[key])
                _note(name, entry, "kept")
                return entry["value"]
            found = _verdict(measure())
            if found.clear:
                kept[key] = _entry(found)
                _write(path, kept)
                _note(name, kept[key], "measured now and kept")
            else:
                _note(name, _entry(found), f"measured now, not kept: {found.doubt}")
            return found.value
    except OSError as exc:
        if found is _NOT_YET:
            found = _verdict(measure())
        _note(name, _entry(found), f"measured now, not kept: {path} cannot be written ({exc})")
        return found.value


def record(name: str, value: Any, source: str) -> None:
    """Note a choice this process made without timing it (what the processor lacks), so the
    run's start-up lines, MLflow params and dry-run report show it beside the timed ones."""
    _note(name, {"value": value}, source)


def _as_entry(raw: Any) -> dict[str, Any]:
    """A kept entry as a dict: a value kept before dates and timings were kept is its value."""
    return raw if isinstance(raw, dict) else {"value": raw}


def _verdict(result: Any) -> Verdict:
    return result if isinstance(result, Verdict) else Verdict(result, True)


def _entry(verdict: Verdict) -> dict[str, Any]:
    return {
        "value": verdict.value,
        "measured_at": time.strftime("%Y-%m-%d %H:%M:%S"),
        "timings": dict(verdict.timings),
    }


def _note(name: str, entry: dict[str, Any], source: str) -> None:
    _CHOICES[name] = {
        "value": entry["value"],
        "source": source,
        "measured_at": entry.get("measured_at"),
        "timings": dict(entry.get("timings") or {}),
    }
    log.info("per-machine choice %s: %s", name, describe(_CHOICES[name]))


def kept(name: str) -> dict[str, Any] | None:
    """This machine's kept entry of `name` (`value`, and when measured since dates were kept,
    `measured_at` and `timings`), or None."""
    entry = _read(folder() / f"{name}.json").get(machine_key())
    return None if entry is None else _as_entry(entry)


def kept_names() -> list[str]:
    """The names this machine has a kept value of, sorted."""
    paths = sorted(folder().glob("*.json")) if folder().is_dir() else []
    return [path.stem for path in paths if machine_key() in _read(path)]


def forget(name: str) -> None:
    """Drop this machine's kept value of `name`, so that the next process measures it again
    (what `benchmarks/fast_paths.py --retime` does before timing anew)."""
    path = folder() / f"{name}.json"
    with exclusive_lock(path.with_name(path.name + ".lock")):
        kept = _read(path)
        if kept.pop(machine_key(), None) is not None:
            _write(path, kept)
    _CHOICES.pop(name, None)


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
