"""How the entry points answer a mistake on the command line or in the input: one line on stderr
and exit status 1, instead of a Python traceback.

A user error (`src.utils.errors.UserError`: a setting, a data file, a model folder; also when
`hydra.utils.instantiate` wraps it), an unknown config key or group option, and an override that
does not parse are each printed as `error: <one line>`. Anything else is a bug and keeps its full
traceback; `HYDRA_FULL_ERROR=1` shows the full traceback of every error.
"""

from __future__ import annotations

import difflib
import os
import re
import sys
from collections.abc import Callable, Sequence
from typing import Any, TextIO

from hydra.errors import (
    ConfigCompositionException,
    MissingConfigException,
    OverrideParseException,
)
from omegaconf.errors import ConfigAttributeError, ConfigKeyError

from src.runs.read_keys import HANDED_ON, target_parameters
from src.tracking.sweep import failed_jobs, forget_failed_jobs
from src.utils.errors import UserError, unwrapped
from src.utils.resolvers import PROJECT_ROOT

FULL_ERROR = "HYDRA_FULL_ERROR"
JOB_LINE = "Error executing job with overrides: "  # Hydra's line before a failed job's error
UNKNOWN_KEY = re.compile(r"Could not override '([^']+)'")
NOT_A_KEY = re.compile(r"Key '[^']*' (is )?not in ")
APPEND = re.compile(r"To append to your config use (\S+)")


def run_cli(hydra_main: Callable[[], Any]) -> Any:
    """Run a `@hydra.main` function as a command. Hydra is told to let errors through (it would
    print a shortened traceback for every one of them); user errors are printed here as one line
    and exit with status 1, other errors keep their traceback. A user who set
    `HYDRA_FULL_ERROR=1` sees every traceback. A multirun in which a job failed ends with one
    line naming the failed jobs and status 1, after every other job has run."""
    forget_failed_jobs()
    if os.environ.get(FULL_ERROR) == "1":
        return exit_if_jobs_failed(hydra_main())
    previous = os.environ.get(FULL_ERROR)
    os.environ[FULL_ERROR] = "1"
    stderr = sys.stderr
    sys.stderr = WithoutJobLine(stderr)
    try:
        return exit_if_jobs_failed(hydra_main())
    except Exception as error:
        message = user_message(error)
        if message is None:
            raise
        sys.stdout.flush()
        print(f"error: {message}", file=sys.stderr, flush=True)
        raise SystemExit(1) from None
    finally:
        if isinstance(sys.stderr, WithoutJobLine):
            sys.stderr = stderr
        if previous is None:
            os.environ.pop(FULL_ERROR, None)
        else:
            os.environ[FULL_ERROR] = previous


def exit_if_jobs_failed(result: Any) -> Any:
    """`result`, or exit with status 1 and one line when jobs of the multirun failed."""
    failed = failed_jobs()
    if not failed:
        return result
    listed = "; ".join(f"job {job}: {error}" for job, error in failed.items())
    sys.stdout.flush()
    print(
        f"error: {len(failed)} job(s) of the sweep failed ({listed}); the others finished",
        file=sys.stderr,
        flush=True,
    )
    raise SystemExit(1)


class WithoutJobLine:
    """A text stream that passes everything on to `stream` except Hydra's `Error executing job
    with overrides: [...]` line, which repeats the command line above the error's own line."""

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream

    def write(self, text: str) -> int:
        if text.startswith(JOB_LINE):
            return len(text)
        return self.stream.write(text)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.stream, name)


def user_message(error: BaseException) -> str | None:
    """The one line to print for a user's mistake, or None for an error that is a bug."""
    cause = user_cause(error)
    if cause is not None:
        return one_line(text_of(cause))
    if isinstance(error, MissingConfigException):
        return missing_option_message(error)
    if isinstance(error, OverrideParseException):
        return override_parse_message(error)
    if isinstance(error, ConfigCompositionException):
        return composition_message(error)
    return None


def user_cause(error: BaseException) -> UserError | None:
    """`error` itself when it is a `UserError`, or the `UserError` that the instantiation of a
    configured object raised (Hydra wraps it, possibly several times, as the `__cause__`)."""
    error = unwrapped(error)
    return error if isinstance(error, UserError) else None


def text_of(error: BaseException) -> str:
    """An exception's message; a `KeyError`'s without the quotes its `str` adds."""
    if len(error.args) == 1 and isinstance(error.args[0], str):
        return error.args[0]
    return str(error)


def one_line(text: str) -> str:
    """The non-empty lines of `text`, stripped and joined with '; ' (a line's final full stop
    dropped when there are several)."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    if len(lines) > 1:
        lines = [line.removesuffix(".") if not line.endswith("..") else line for line in lines]
    return "; ".join(lines)


def missing_option_message(error: MissingConfigException) -> str:
    """`model=gpt5`: what was not found and the options the group has, with the closest ones."""
    first = str(error).strip().splitlines()[0].removesuffix(".")
    if not error.missing_cfg_file:
        return first
    group, _, name = error.missing_cfg_file.rpartition("/")
    # Hydra names the options of a single choice (`model=gpt5`), not of a list's entry
    # (`hardware=[cpu,bf17]`): those are the group folder's files, suggested as list entries
    entry = not error.options
    options = [str(option) for option in error.options or group_options(group)]
    if not options:
        return first
    close = [
        option if entry else f"{group}={option}"
        for option in difflib.get_close_matches(name, options, n=3)
    ]
    hint = f"; did you mean {' or '.join(close)}{' in the list' if entry else ''}?" if close else ""
    return f"{first}; available options in '{group}': {', '.join(options)}{hint}"


def group_options(group: str) -> list[str]:
    """The options of a config group: its folder's YAML files (none for an unknown group)."""
    return sorted(path.stem for path in (PROJECT_ROOT / "conf" / group).glob("*.yaml"))


def override_parse_message(error: OverrideParseException) -> str:
    """An override that is not valid override syntax, named, with the parser's complaint."""
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    lines = [line for line in lines if not line.startswith("See https://")]
    if error.override and not any(error.override in line for line in lines):
        lines.insert(0, f"cannot parse the override {error.override!r}")
    return (
        "; ".join(lines)
        + " (override syntax: https://hydra.cc/docs/advanced/override_grammar/basic/)"
    )


def composition_message(error: ConfigCompositionException) -> str:
    """A config that could not be composed; an unknown key comes with the closest existing
    keys (`algo.kl_bta` -> `did you mean algo.kl_beta?`)."""
    text = str(error)
    cause = error.__cause__
    found = UNKNOWN_KEY.search(text)
    unknown = isinstance(cause, (ConfigAttributeError, ConfigKeyError))
    if found and unknown and NOT_A_KEY.search(str(cause)):
        key = found.group(1)
        config = config_for_suggestions(key)
        close = closest_keys(key, config)
        if close:
            return f"{key} is not a key of the config: did you mean {' or '.join(close)}?"
        append = APPEND.search(text)
        return unknown_key_message(key, config, append.group(1) if append else f"+{key}=VALUE")
    message = one_line(text)
    if cause is not None:
        message += f": {one_line(text_of(cause)).split('; ')[0]}"
    return message


def unknown_key_message(key: str, config: Any, added: str) -> str:
    """What to do with `key`, which the config lacks: the `+` form only where the section it
    falls in is built by a part that takes it (`+trainer.limit_val_batches=2`); elsewhere the
    keys the section has, since a key added there would be read by nothing."""
    parent, _, name = key.rpartition(".")
    node: Any = config
    for part in parent.split(".") if parent else []:
        node = node.get(part) if isinstance(node, dict) else None
    if not parent or not isinstance(node, dict):
        return f"{key} is not a key of the config; no config of this run reads it"
    target = node.get("_target_", HANDED_ON.get(parent))
    if isinstance(target, str):
        parameters = target_parameters(target)
        if parameters is None or name in parameters:
            return f"{key} is not a key of the config; to add it as a new key use {added}"
    keys = ", ".join(sorted(str(k) for k in node if not str(k).startswith("_")))
    return f"{key} is not a key of the config, and nothing reads it; {parent} has {keys}"


def closest_keys(key: str, config: Any) -> list[str]:
    """Dotted keys of `config` closest to `key`: the first part of `key` that `config` lacks is
    matched against the keys at that level, the rest of `key` kept."""
    parts = key.split(".")
    node = config
    for index, part in enumerate(parts):
        if not isinstance(node, dict):
            return []
        if part in node:
            node = node[part]
            continue
        names = [str(name) for name in node]
        close = difflib.get_close_matches(part, names, n=3, cutoff=0.6)
        return [".".join([*parts[:index], name, *parts[index + 1 :]]) for name in close]
    return []


def config_for_suggestions(key: str) -> dict[str, Any] | None:
    """The command's config as a plain dict (unresolved), composed with the command line's
    other overrides, so that keys of chosen groups are there; without them when they do not
    compose either (a sweep, a second mistake); None when nothing composes."""
    args = command_line_args()
    config_name = getattr(args, "config_name", None) or "train"
    overrides = [
        override
        for override in getattr(args, "overrides", None) or []
        if override.lstrip("+~").partition("=")[0] != key
    ]
    for attempt in (overrides, []):
        config = compose_plain(config_name, attempt)
        if config is not None:
            return config
    return None


def command_line_args() -> Any:
    """This process's command line, parsed as `@hydra.main` parses it; None if it does not."""
    from hydra._internal.utils import get_args_parser

    try:
        return get_args_parser().parse_args(sys.argv[1:])
    except (Exception, SystemExit):
        return None


def compose_plain(config_name: str, overrides: Sequence[str]) -> dict[str, Any] | None:
    """`conf/<config_name>.yaml` with `overrides`, Hydra's own keys included, unresolved; None
    when it does not compose."""
    from omegaconf import OmegaConf

    from src.utils.compose import compose_config

    try:
        return OmegaConf.to_container(compose_config(overrides, config_name), resolve=False)
    except Exception:
        return None
