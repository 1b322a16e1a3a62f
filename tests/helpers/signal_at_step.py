"""A test-only callback that signals its own training process at a chosen optimizer step.

Tests that kill, stop or preempt a run decide the step in advance and the process acts on it
itself, so where the signal lands does not depend on how fast the machine is.
"""

from __future__ import annotations

import signal as signals
from typing import Any

import lightning as L
from lightning.pytorch.callbacks import Callback

MOMENTS = ("start", "end")


class SignalAtStep(Callback):
    """Send `signal` (a name such as SIGKILL) to this process `times` times as optimizer step
    `step` begins (`moment=start`, before its rollout) or once its metrics are logged
    (`moment=end`, before Lightning's checkpoint callbacks of that step run).

    `signal.raise_signal` runs the Python handler before it returns, so each signal is handled
    before the next is sent: two SIGINTs are two Ctrl-Cs, not one pending signal."""

    def __init__(self, step: int, signal: str, moment: str = "end", times: int = 1) -> None:
        if moment not in MOMENTS:
            raise ValueError(f"moment must be one of {MOMENTS}, got {moment!r}")
        self.step = step
        self.signum = signals.Signals[signal]
        self.moment = moment
        self.times = times

    def on_train_batch_start(self, trainer: L.Trainer, *args: Any) -> None:
        if self.moment == "start" and trainer.global_step + 1 == self.step:
            self._send()

    def on_train_batch_end(self, trainer: L.Trainer, *args: Any) -> None:
        if self.moment == "end" and trainer.global_step == self.step:
            self._send()

    def _send(self) -> None:
        for _ in range(self.times):
            signals.raise_signal(self.signum)


def signal_at(step: int, signal: str, moment: str = "end", times: int = 1) -> list[str]:
    """The command-line overrides that add the callback to a run."""
    key = "+callbacks.signal_at_step"
    return [
        f"{key}._target_={__name__}.SignalAtStep",
        f"{key}.step={step}",
        f"{key}.signal={signal}",
        f"{key}.moment={moment}",
        f"{key}.times={times}",
    ]
