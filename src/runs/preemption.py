"""SIGTERM (SLURM preemption, `kill`, a closing shell) and Ctrl-C end a run at the next step
boundary with a checkpoint, instead of losing everything since the last periodic one; a second
Ctrl-C stops at once."""

from __future__ import annotations

import logging
import signal
from pathlib import Path
from types import FrameType
from typing import Any

import lightning as L
from lightning.pytorch.callbacks import Callback, ModelCheckpoint

from src.utils.stopping import Stopped

log = logging.getLogger(__name__)


class Preempted(Stopped):
    """The run was asked to stop by a signal and stopped after a step with its checkpoint."""


class Interrupted(Stopped):
    """The run was stopped at once (a Ctrl-C while stopping, or one outside GRPO training): no
    new checkpoint was written."""


class PreemptionCheckpoint(Callback):
    """While GRPO trains, SIGTERM or Ctrl-C (SIGINT) lets the current step finish, writes
    `last.ckpt` beside the periodic checkpoints, marks the MLflow run KILLED and exits with
    status 128 + signal (143, 130). A Ctrl-C while that is under way stops at once instead
    (`Interrupted`), unless the checkpoint is being written.

    Lightning alone only looks at SIGTERM at the end of an epoch, and a GRPO run is one long
    epoch; this handler replaces Lightning's during training and is removed afterwards.
    """

    def __init__(self, signals: tuple[str, ...] = ("SIGTERM", "SIGINT")) -> None:
        self.signals = tuple(getattr(signal, name) for name in signals)
        self.received: int | None = None
        self._previous: dict[int, Any] = {}
        self._trainer: L.Trainer | None = None
        self._checkpointing = False  # from the checkpoint write on, a second Ctrl-C waits

    def on_train_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self.received, self._trainer, self._checkpointing = None, trainer, False
        for signum in self.signals:
            self._previous[signum] = signal.signal(signum, self._note)

    def _note(self, signum: int, frame: FrameType | None) -> None:
        name = signal.Signals(signum).name
        if self.received is None:
            again = " (Ctrl-C again stops at once, without one)" if signum == signal.SIGINT else ""
            log.warning(
                "Received %s: finishing this step, then writing a checkpoint and stopping%s",
                name,
                again,
            )
            self.received = signum
        elif signum != signal.SIGINT or self._checkpointing or self._trainer is None:
            log.warning("Received %s while stopping: the checkpoint is written first", name)
        else:
            raise self._interrupted(self._trainer, signum)

    def _interrupted(self, trainer: L.Trainer, signum: int) -> Interrupted:
        """The exception of a second Ctrl-C: it names the newest checkpoint on disk, if any."""
        return interrupted(
            f"{signal.Signals(signum).name} received while stopping: stopped at once during "
            f"step {trainer.global_step + 1}",
            checkpoint_path(trainer),
            "the run has no checkpoint yet (callbacks.checkpoint.every_n_train_steps), "
            "so it cannot be continued",
        )

    def on_train_batch_end(self, trainer: L.Trainer, *args: Any) -> None:
        if self.received is None:
            return
        path = checkpoint_path(trainer)
        self._checkpointing = True
        trainer.save_checkpoint(path)
        name = signal.Signals(self.received).name
        message = (
            f"{name} received: stopped after step {trainer.global_step} with its checkpoint at "
            f"{path}; continue with ckpt_path={path}"
        )
        log.warning(message)  # SystemExit prints nothing of its own
        raise Preempted(message, self.received)

    def on_train_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self._restore()

    def on_exception(
        self, trainer: L.Trainer, pl_module: L.LightningModule, exception: BaseException
    ) -> None:
        self._restore()

    def teardown(self, trainer: L.Trainer, pl_module: L.LightningModule, stage: str) -> None:
        self._restore()

    def _restore(self) -> None:
        """Put back the handlers training replaced: outside it, Ctrl-C interrupts as usual."""
        for signum, handler in self._previous.items():
            signal.signal(signum, handler)
        self._previous = {}
        self._trainer = None


def interrupted(what: str, checkpoint: Path | None, without_checkpoint: str) -> Interrupted:
    """A Ctrl-C that stopped the run at once, logged: `what` happened, no new checkpoint was
    written, and the run continues from `checkpoint` when it is on disk (else the message says
    `without_checkpoint`)."""
    found = (
        f"the newest checkpoint is {checkpoint}; continue with ckpt_path={checkpoint}"
        if checkpoint is not None and checkpoint.is_file()
        else without_checkpoint
    )
    message = f"{what}; no new checkpoint was written; {found}"
    log.warning(message)
    return Interrupted(message, signal.SIGINT)


def checkpoint_path(trainer: L.Trainer) -> Path:
    """`last.ckpt` in the folder of the run's ModelCheckpoint (the Lightning root without one)."""
    folders = [
        callback.dirpath
        for callback in trainer.callbacks
        if isinstance(callback, ModelCheckpoint) and callback.dirpath
    ]
    folder = Path(folders[0] if folders else trainer.default_root_dir)
    return folder / f"{ModelCheckpoint.CHECKPOINT_NAME_LAST}{ModelCheckpoint.FILE_EXTENSION}"
