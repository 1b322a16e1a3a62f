"""Errors in what the user gave (a setting, a data file, a folder): the entry points print their
message as one line, without a traceback, and exit with status 1."""

from __future__ import annotations

from hydra.errors import InstantiationException


class UserError(Exception):
    """Bad input rather than a bug: the message names the key, file or line and what to do."""


class ConfigError(UserError, ValueError):
    """A setting, or a pair of settings, that cannot work; the message names the keys."""


class MissingFileError(UserError, FileNotFoundError):
    """A file or folder the configuration points to is not there; the message names the key."""


def unwrapped(error: BaseException) -> BaseException:
    """The error a configured object raised, without the `InstantiationException`(s) Hydra's
    `instantiate` wraps it in (their text repeats the target and the config key)."""
    while isinstance(error, InstantiationException) and error.__cause__ is not None:
        error = error.__cause__
    return error
