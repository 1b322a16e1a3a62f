"""What a policy role provides (generator today; reader and rewriter next), declared once."""

from __future__ import annotations

from typing import Any, Protocol


class Role(Protocol):
    """Turns data rows into prompts for the trained network, and its completions into the
    outcomes the reward scores; names the completion a supervised warm start teaches."""

    def prompts(self, rows: list[dict[str, Any]], tokenizer: Any = None) -> list[str]:
        """One prompt text per row (the tokenizer supplies a chat template when used)."""
        ...

    def outcomes(self, completions: list[str], rows: list[dict[str, Any]]) -> list[str]:
        """What the reward scores for each completion; `rows` are aligned with `completions`."""
        ...

    def sft_targets(self, rows: list[dict[str, Any]]) -> list[str]:
        """The completion a supervised warm start teaches for each row."""
        ...
