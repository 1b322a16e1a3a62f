"""DAPO's soft overlong punishment (Yu et al. 2025, arXiv:2503.14476, section 3.4; verl's
`overlong_buffer`): a penalty that grows linearly over the last `buffer` tokens before the
length limit, so the policy learns to finish before it is cut off. docs/objective.md states it.
"""

from __future__ import annotations

from collections.abc import Sequence

from src.utils.errors import ConfigError


class OverlongPenalty:
    """Scores a completion of L tokens (EOS included) 0 while L <= max_length - buffer, then
    -penalty * (L - (max_length - buffer)) / buffer, down to -penalty at max_length: a
    length-only reward, combined with the task's (`reward=[accuracy,overlong]`)."""

    def __init__(self, max_length: int, buffer: int, penalty: float = 1.0) -> None:
        if buffer > max_length:
            raise ConfigError(
                f"reward.functions.overlong.buffer must be at most max_length ({max_length}), got "
                f"{buffer}"
            )
        self.max_length = max_length
        self.buffer = buffer
        self.penalty = float(penalty)

    def score_lengths(self, lengths: Sequence[int]) -> list[float]:
        """One score per completion from its token count."""
        start = self.max_length - self.buffer
        return [-self.penalty * min(max(n - start, 0), self.buffer) / self.buffer for n in lengths]
