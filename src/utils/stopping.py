"""`Stopped`: how a run or a sweep ends when a signal stops it on purpose."""

from __future__ import annotations


class Stopped(SystemExit):
    """A signal stopped the run; the message says whether a checkpoint was written. Exit status
    128 + signal, as a shell reports a process ended by that signal. A SystemExit, so that
    Lightning passes it on unchanged (it turns a KeyboardInterrupt into exit status 1)."""

    def __init__(self, message: str, signum: int) -> None:
        super().__init__(128 + signum)
        self.message = message

    def __str__(self) -> str:
        return self.message
