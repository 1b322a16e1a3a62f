"""`reward=judge`: a frozen judge model's score of each outcome as the reward.

`model` is a folder or a hub name. A folder written by the char_diffusion judge stage is that
character judge (the probability that a filled window is real text); anything else is loaded
as a Hugging Face sequence-classification reward model (`trust_remote_code` off), which scores
(prompt, answer) pairs when `prompt_field` names the row field holding the prompt.
"""

from __future__ import annotations

from typing import Any, Protocol

from src.model.char_encoder import char_model_kind
from src.model.char_judge import KIND as CHAR_JUDGE
from src.model.char_judge import load_char_judge
from src.model.sequence_classifier import CONFIG_KEY, SequenceClassifierScorer, resolve_device
from src.utils.errors import ConfigError


class TextScorer(Protocol):
    """What the reward asks of a loaded judge: one number per text."""

    def score(self, texts: list[str], pairs: list[str] | None = None) -> list[float]: ...


class CharJudgeScorer:
    """The character judge behind `TextScorer`: `pairs`, when given, are the masked windows,
    which a judge that sees the mask reads beside each filled one (any other ignores them)."""

    def __init__(self, folder: str, device: str, batch_size: int) -> None:
        self.judge = load_char_judge(folder, CONFIG_KEY).to(resolve_device(device))
        self.batch_size = batch_size

    def score(self, texts: list[str], pairs: list[str] | None = None) -> list[float]:
        return self.judge.score(texts, self.batch_size, masked=pairs)


class JudgeReward:
    """Scores outcomes with a frozen judge, loaded on first use (a judge trained by a stage
    before GRPO does not exist yet when the reward is built), on `device`, batched."""

    def __init__(
        self,
        model: str | None = None,
        prompt_field: str | None = None,
        device: str = "auto",
        batch_size: int = 64,
        max_length: int = 512,
        positive_label: int | None = None,
    ) -> None:
        if not model:
            raise ConfigError(
                f"{CONFIG_KEY} is not set: name a Hugging Face sequence-classification reward "
                "model (hub id or folder), or use task=char_diffusion, which trains its judge"
            )
        if batch_size < 1:
            raise ConfigError(f"reward.functions.judge.batch_size must be >= 1, got {batch_size}")
        self.model = str(model)
        self.prompt_field = prompt_field
        self.device = device
        self.batch_size = batch_size
        self.max_length = max_length
        self.positive_label = positive_label
        self.scorer: TextScorer | None = None

    def loaded(self) -> TextScorer:
        """The judge, loaded once."""
        if self.scorer is None:
            kind = char_model_kind(self.model)
            if kind not in (None, CHAR_JUDGE):
                raise ConfigError(
                    f"{CONFIG_KEY}={self.model} holds a {kind!r} model, not a judge; give a "
                    "judge folder or a sequence-classification reward model"
                )
            if kind == CHAR_JUDGE:
                self.scorer = CharJudgeScorer(self.model, self.device, self.batch_size)
            else:
                self.scorer = SequenceClassifierScorer(
                    self.model,
                    device=self.device,
                    batch_size=self.batch_size,
                    max_length=self.max_length,
                    positive_label=self.positive_label,
                )
        return self.scorer

    def __call__(self, outcomes: list[str], rows: list[dict[str, Any]]) -> list[float]:
        pairs = None
        if self.prompt_field is not None:
            try:
                pairs = [str(row[self.prompt_field]) for row in rows]
            except KeyError:
                raise ConfigError(
                    f"reward.functions.judge.prompt_field={self.prompt_field!r}: the data rows "
                    f"have no such field; they have {sorted(rows[0])}"
                ) from None
        return self.loaded().score(outcomes, pairs)
