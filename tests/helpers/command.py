"""An entry point's command line run in this process: `python -m src.train ARGS` as a user types
it (the module runs as `__main__`: Hydra parses the arguments, `run_cli` answers mistakes), its
exit status and what it
printed, without the seconds a fresh interpreter spends importing torch, transformers and
Lightning. The few tests that need a real interpreter (signals, exit codes seen by a shell)
start one (`tests.helpers.training_process`)."""

from __future__ import annotations

import contextlib
import io
import logging
import os
import runpy
import subprocess
import sys
import traceback
import warnings
from collections.abc import Iterator, Mapping

from hydra.core.global_hydra import GlobalHydra

from src.utils.resolvers import PROJECT_ROOT


def command(
    module: str, *args: str, environment: Mapping[str, str | None] | None = None
) -> subprocess.CompletedProcess:
    """Run `python -m module args...` in this process, from the project root, with the
    environment variables `environment` set (None: unset) for its duration. Returns what a
    finished subprocess would: exit status (0, 1 for a user error or an uncaught exception,
    whose traceback goes to stderr as Python prints it), stdout and stderr."""
    stdout, stderr = io.StringIO(), io.StringIO()
    with (
        _process_state([module, *args], environment or {}),
        contextlib.redirect_stdout(stdout),
        contextlib.redirect_stderr(stderr),
    ):
        returncode = _exit_status(module)
    return subprocess.CompletedProcess(
        [sys.executable, "-m", module, *args], returncode, stdout.getvalue(), stderr.getvalue()
    )


def _exit_status(module: str) -> int:
    """The exit status of running `module` as `__main__`, as the interpreter would report it
    (the module's code runs afresh; what it imports is already loaded)."""
    try:
        with warnings.catch_warnings():
            # the module may be imported already (by a test); its code simply runs again
            warnings.filterwarnings("ignore", "'.*' found in sys.modules", RuntimeWarning)
            runpy.run_module(module, run_name="__main__", alter_sys=True)
    except SystemExit as stop:
        if stop.code is None or isinstance(stop.code, int):
            return stop.code or 0
        print(stop.code, file=sys.stderr)
        return 1
    except Exception:
        traceback.print_exc()  # to the redirected stderr, as the interpreter prints it
        return 1
    return 0


@contextlib.contextmanager
def _process_state(argv: list[str], environment: Mapping[str, str | None]) -> Iterator[None]:
    """Set what a fresh process would have (its arguments, environment and working folder)
    and afterwards put back this process's, including the logging setup Hydra replaced."""
    saved_argv, saved_cwd, saved_environ = sys.argv, os.getcwd(), dict(os.environ)
    saved_logging = _logging_state()
    sys.argv = argv
    os.chdir(PROJECT_ROOT)
    for key, value in environment.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value
    try:
        yield
    finally:
        sys.argv = saved_argv
        os.chdir(saved_cwd)
        os.environ.clear()
        os.environ.update(saved_environ)
        _restore_logging(saved_logging)
        GlobalHydra.instance().clear()


LoggingState = dict[str, tuple[list[logging.Handler], int, bool, bool]]


def _logging_state() -> LoggingState:
    """Handlers, level, propagation and disabled flag of the root logger and every named one."""
    loggers = {"": logging.getLogger()}
    loggers.update(
        (name, logger)
        for name, logger in logging.Logger.manager.loggerDict.items()
        if isinstance(logger, logging.Logger)
    )
    return {
        name: (list(logger.handlers), logger.level, logger.propagate, logger.disabled)
        for name, logger in loggers.items()
    }


def _restore_logging(state: LoggingState) -> None:
    """Put `state` back; handlers added since (Hydra's console and run-folder log) are closed."""
    for name, logger in list(logging.Logger.manager.loggerDict.items()):
        if not isinstance(logger, logging.Logger):
            continue
        _restore_logger(logger, state.get(name, ([], logging.NOTSET, True, False)))
    _restore_logger(logging.getLogger(), state[""])


def _restore_logger(
    logger: logging.Logger, saved: tuple[list[logging.Handler], int, bool, bool]
) -> None:
    handlers, level, propagate, disabled = saved
    for handler in logger.handlers:
        if handler not in handlers:
            handler.close()
    logger.handlers = list(handlers)
    logger.setLevel(level)
    logger.propagate = propagate
    logger.disabled = disabled
