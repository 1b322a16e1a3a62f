"""SIGTERM (SLURM preemption, `kill`, a closing shell) ends a run at the next step boundary with
a checkpoint, instead of losing everything since the last periodic one."""

from __future__ import annotations

import logging
import signal
from pathlib import Path
from types import FrameType
from typing import Any

import lightning as L
from lightning.pytorch.callbacks import Callback, ModelCheckpoint

log = logging.getLogger(__name__)


class Preempted(SystemExit):
    """The run was asked to stop by a signal; its checkpoint is written. Exit status 128 + signal,
    as a shell reports a process ended by that signal."""

    def __init__(self, message: str, signum: int) -> None:
        super().__init__(128 + signum)
        self.message = message

    def __str__(self) -> str:
        return self.message


class PreemptionCheckpoint(Callback):
    """While GRPO trains, SIGTERM lets the current step finish, writes `last.ckpt` beside the
    periodic checkpoints, marks the MLflow run KILLED and exits with status 143.

    Lightning alone only looks at SIGTERM at the end of an epoch, and a GRPO run is one long
    epoch; this handler replaces Lightning's during training and is removed afterwards.
    """

    def __init__(self, signals: tuple[str, ...] = ("SIGTERM",)) -> None:
        self.signals = tuple(getattr(signal, name) for name in signals)
        self.received: int | None = None
        self._previous: dict[int, Any] = {}

    def on_train_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self.received = None
        for signum in self.signals:
            self._previous[signum] = signal.signal(signum, self._note)

    def _note(self, signum: int, frame: FrameType | None) -> None:
        if self.received is None:
            log.warning(
                "Received %s: finishing this step, then writing a checkpoint and stopping",
                signal.Signals(signum).name,
            )
        self.received = signum

    def on_train_batch_end(self, trainer: L.Trainer, *args: Any) -> None:
        if self.received is None:
            return
        path = checkpoint_path(trainer)
        trainer.save_checkpoint(path)
        name = signal.Signals(self.received).name
        message = (
            f"{name} received: stopped after step {trainer.global_step} with its checkpoint at "
            f"{path}; continue with ckpt_path={path}"
        )
        log.warning(message)  # SystemExit prints nothing of its own
        raise Preempted(message, self.received)

    def teardown(self, trainer: L.Trainer, pl_module: L.LightningModule, stage: str) -> None:
        for signum, handler in self._previous.items():
            signal.signal(signum, handler)
        self._previous = {}


def checkpoint_path(trainer: L.Trainer) -> Path:
    """`last.ckpt` in the folder of the run's ModelCheckpoint (the Lightning root without one)."""
    folders = [
        callback.dirpath
        for callback in trainer.callbacks
        if isinstance(callback, ModelCheckpoint) and callback.dirpath
    ]
    folder = Path(folders[0] if folders else trainer.default_root_dir)
    return folder / f"{ModelCheckpoint.CHECKPOINT_NAME_LAST}{ModelCheckpoint.FILE_EXTENSION}"
