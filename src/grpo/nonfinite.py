"""The guard against non-finite updates: skip them, and stop after too many in a row."""

from __future__ import annotations

import warnings
from typing import Any


class NonFiniteTrainingError(RuntimeError):
    """Too many updates in a row had a non-finite loss or gradient."""


class NonFiniteGuard:
    """Counts updates skipped for a non-finite loss or gradient norm (all of them, and in a
    row) and raises once `max_in_a_row` come one after another."""

    def __init__(self, max_in_a_row: int) -> None:
        self.max_in_a_row = max_in_a_row
        self.skipped = 0  # updates skipped in all, logged as `skipped_steps`
        self.in_a_row = 0

    def passed(self) -> None:
        """A finite update went through."""
        self.in_a_row = 0

    def skip(self, step: int, loss: float, grad_norm: float) -> None:
        """Count the skipped update of optimizer step `step` (the weights are those of step
        `step - 1`); warn, or raise when it is one too many in a row."""
        self.skipped += 1
        self.in_a_row += 1
        warnings.warn(
            f"step {step}: non-finite loss ({loss:g}) or gradient norm ({grad_norm:g}); "
            f"update skipped ({self.in_a_row} in a row)",
            RuntimeWarning,
            stacklevel=3,
        )
        if self.in_a_row >= self.max_in_a_row:
            raise NonFiniteTrainingError(
                f"{self.in_a_row} updates in a row had a non-finite loss or gradient "
                f"(last: loss {loss:g}, gradient norm {grad_norm:g}) at step {step}; stopping "
                f"(algo.max_nonfinite_steps={self.max_in_a_row}). The weights are those of step "
                f"{step - 1}; the last checkpoint in the run folder's checkpoints/ is from "
                "before. Lower algo.optimizer.lr, or check the rewards and the data."
            )

    def state_dict(self) -> dict[str, Any]:
        """The counters, for a checkpoint."""
        return {"skipped_steps": self.skipped, "nonfinite_in_a_row": self.in_a_row}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """The counters of a checkpoint (zero when it has none)."""
        self.skipped = int(state.get("skipped_steps", 0))
        self.in_a_row = int(state.get("nonfinite_in_a_row", 0))
