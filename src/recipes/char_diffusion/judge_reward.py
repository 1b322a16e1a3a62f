"""`task=char_diffusion`'s reward: the judge stage's character judge (the probability that a
filled window is real text), or a Hugging Face reward model where `model` names one."""

from __future__ import annotations

from src.model.saved import saved_kind
from src.model.sequence_classifier import CONFIG_KEY, resolve_device
from src.recipes.char_diffusion.judge_network import KIND as CHAR_JUDGE
from src.recipes.char_diffusion.judge_network import load_char_judge
from src.reward.judge import JudgeReward, TextScorer
from src.utils.errors import ConfigError


class CharJudgeScorer:
    """The character judge behind `TextScorer`: `pairs`, when given, are the masked windows,
    which a judge that sees the mask reads beside each filled one (any other ignores them)."""

    def __init__(self, folder: str, device: str, batch_size: int) -> None:
        self.judge = load_char_judge(folder, CONFIG_KEY).to(resolve_device(device))
        self.batch_size = batch_size

    def score(self, texts: list[str], pairs: list[str] | None = None) -> list[float]:
        return self.judge.score(texts, self.batch_size, masked=pairs)


class CharJudgeReward(JudgeReward):
    """`JudgeReward` that also loads a character judge folder (one the judge stage wrote)."""

    def load(self) -> TextScorer:
        kind = saved_kind(self.model)
        if kind is None:
            return super().load()
        if kind != CHAR_JUDGE:
            raise ConfigError(
                f"{CONFIG_KEY}={self.model} holds a {kind!r} model, not a judge; give a "
                "judge folder or a sequence-classification reward model"
            )
        return CharJudgeScorer(self.model, self.device, self.batch_size)
