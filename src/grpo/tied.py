"""Saying out loud that a run has nothing to learn: every group's rewards equal, rollout after
rollout.

GRPO learns from differences between the rewards of a prompt's completions. When every
completion of every group scores the same (a model that never gets an answer right, a task too
easy or too hard for it), every advantage is 0 and, without a KL term, so is the loss: the run
goes on and learns nothing, with no error.
"""

from __future__ import annotations

from typing import Any


class TiedGroupsWatch:
    """Counts rollouts in a row in which every group's rewards were equal, and gives one
    warning, once per run, when `patience` have come one after another (0: never)."""

    def __init__(self, patience: int) -> None:
        self.patience = patience
        self.in_a_row = 0  # logged as `tied_rollouts`
        self.warned = False

    def observe(self, tied_share: float, group_size: int) -> str | None:
        """Count a rollout whose share of groups with all-equal rewards is `tied_share`
        (`frac_reward_zero_std`). Returns the warning to give, the first time the count
        reaches `patience`; None otherwise."""
        self.in_a_row = self.in_a_row + 1 if tied_share >= 1.0 else 0
        if self.warned or not self.patience or self.in_a_row < self.patience:
            return None
        self.warned = True
        return (
            f"nothing to learn: in each of the last {self.in_a_row} rollouts every group's "
            f"{group_size} completions got the same reward, so every advantage is 0 and the "
            "policy does not move. What helps: a warm start (sft.enabled=true), easier data, "
            "a reward that tells completions apart, or a larger algo.group_size "
            f"(algo.warn_tied_rollouts={self.patience} sets when this is said; 0 never)"
        )

    def state_dict(self) -> dict[str, Any]:
        """The count and whether the warning was given, for a checkpoint."""
        return {"tied_rollouts": self.in_a_row, "tied_warned": self.warned}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """The state of a checkpoint (a fresh watch when it has none)."""
        self.in_a_row = int(state.get("tied_rollouts", 0))
        self.warned = bool(state.get("tied_warned", False))
