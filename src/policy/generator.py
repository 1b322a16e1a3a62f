"""The generator role: the trained model answers the prompt itself; its text is the outcome."""

from __future__ import annotations

from typing import Any


class Generator:
    """Builds prompts from rows with a template, optionally through the tokenizer's chat template.

    `template` is a `str.format` pattern over the row's fields; `sft_target` is the pattern of
    the completion a supervised warm start teaches (EOS is appended by the SFT module).
    """

    def __init__(
        self,
        template: str = "{question}",
        sft_target: str = " {answer}",
        system_prompt: str | None = None,
        use_chat_template: bool = False,
    ) -> None:
        self.template = template
        self.sft_target = sft_target
        self.system_prompt = system_prompt
        self.use_chat_template = use_chat_template

    def _fill(self, pattern: str, row: dict[str, Any], what: str) -> str:
        try:
            return pattern.format(**row)
        except KeyError as error:
            raise KeyError(
                f"policy.{what} uses field {error.args[0]!r} which the data rows lack; "
                f"row fields are {sorted(row)}"
            ) from None

    def prompts(self, rows: list[dict[str, Any]], tokenizer: Any = None) -> list[str]:
        """One prompt text per row."""
        texts = [self._fill(self.template, row, "template") for row in rows]
        if not self.use_chat_template:
            return texts
        if tokenizer is None or getattr(tokenizer, "chat_template", None) is None:
            raise ValueError(
                "policy.use_chat_template is true but the tokenizer has no chat template"
            )
        system = [{"role": "system", "content": self.system_prompt}] if self.system_prompt else []
        return [
            tokenizer.apply_chat_template(
                [*system, {"role": "user", "content": text}],
                tokenize=False,
                add_generation_prompt=True,
            )
            for text in texts
        ]

    def sft_targets(self, rows: list[dict[str, Any]]) -> list[str]:
        """The completion text a warm start teaches for each row."""
        return [self._fill(self.sft_target, row, "sft_target") for row in rows]

    def outcomes(self, completions: list[str], rows: list[dict[str, Any]]) -> list[str]:
        """What the reward scores: for a generator, its own completion."""
        return completions
