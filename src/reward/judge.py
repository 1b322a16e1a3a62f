"""`reward=judge`: a frozen judge model's score of each outcome as the reward.

`model` is a folder or a hub name of a Hugging Face sequence-classification reward model
(`trust_remote_code` off), which scores (prompt, answer) pairs when `prompt_field` names the
row field holding the prompt. A recipe that trains a judge of its own loads it by overriding
`load` (task=char_diffusion: `src.recipes.char_diffusion.judge_reward.CharJudgeReward`).
"""

from __future__ import annotations

from typing import Any, Protocol

from src.model.saved import saved_kind
from src.model.sequence_classifier import CONFIG_KEY, SequenceClassifierScorer
from src.utils.errors import ConfigError


class TextScorer(Protocol):
    """What the reward asks of a loaded judge: one number per text."""

    def score(self, texts: list[str], pairs: list[str] | None = None) -> list[float]: ...


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
            self.scorer = self.load()
        return self.scorer

    def load(self) -> TextScorer:
        """The Hugging Face reward model `model` names; a folder of one of our own networks is
        refused (the recipe that trained it loads it through its own reward)."""
        kind = saved_kind(self.model)
        if kind is not None:
            raise ConfigError(
                f"{CONFIG_KEY}={self.model} holds our own {kind!r} network, not a Hugging Face "
                "sequence-classification reward model; task=char_diffusion scores with its judge"
            )
        return SequenceClassifierScorer(
            self.model,
            device=self.device,
            batch_size=self.batch_size,
            max_length=self.max_length,
            positive_label=self.positive_label,
        )

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
