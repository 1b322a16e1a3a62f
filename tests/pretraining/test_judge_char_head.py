"""A judge with a character head: which characters it learns from (`char_targets`), its score
as the mean over the filled characters, its loss beside the window loss, and its settings."""

from __future__ import annotations

import random

import pytest
import torch
from omegaconf import OmegaConf

from src.recipes.char_diffusion.encoder import PAD
from src.recipes.char_diffusion.judge_network import CharJudge, load_char_judge
from src.recipes.char_diffusion.judge_stage import (
    Corrupted,
    JudgeLoss,
    JudgeModule,
    Schedule,
    char_targets,
    train_judge,
)
from src.utils.errors import ConfigError

SHAPE = {"max_length": 8, "hidden_size": 16, "num_layers": 1, "num_heads": 2}
SCHEDULE = Schedule(torch.optim.AdamW, max_steps=10, warmup_steps=1)


def judge(**settings) -> CharJudge:
    torch.manual_seed(0)
    return CharJudge(**SHAPE, intermediate_size=32, dropout=0.0, **settings).eval()


def test_targets_mark_the_real_windows_characters_among_the_filled_ones():
    texts, originals = ["abzd", "xy"], ["abcd", "xq"]
    ids = torch.tensor([[5, 6, 7, 8], [9, 10, PAD, PAD]])
    marks = torch.tensor([[0, 1, 1, 0], [1, 1, 0, 0]])
    own, counted = char_targets(texts, originals, ids, marks, sees_mask=True)
    assert own.tolist() == [[1, 1, 0, 1], [1, 0, 0, 0]]
    assert counted.tolist() == [[0, 1, 1, 0], [1, 1, 0, 0]]
    own, counted = char_targets(texts, originals, ids, marks, sees_mask=False)
    assert counted.tolist() == [[1, 1, 1, 1], [1, 1, 0, 0]]  # every character, no padding


def test_the_characters_score_is_the_mean_over_the_filled_characters():
    scorer = judge(sees_mask=True, char_head=True, score="characters")
    texts = ["the cat", "the cat"]
    masked = ["the c█t", "the cat"]  # the second window has nothing filled
    ids, marks = scorer.encode(texts, masked)
    chars = torch.sigmoid(scorer.outputs(ids, marks)[1])
    expected = [chars[0, 5].item(), chars[1, :7].mean().item()]
    assert scorer.score(texts, masked=masked) == pytest.approx(expected, abs=1e-6)
    window = judge(sees_mask=True, char_head=True)  # the same weights, scored as a window
    assert window.score(texts, masked=masked) == pytest.approx(
        torch.sigmoid(window(ids, marks)).tolist(), abs=1e-6
    )


def test_a_character_judge_saves_and_reloads(tmp_path):
    scorer = judge(sees_mask=True, char_head=True, score="characters")
    scorer.save(tmp_path / "judge")
    again = load_char_judge(tmp_path / "judge")
    assert again.settings == scorer.settings
    texts, masked = ["a cat sat"], ["a c██ sat"]
    assert again.score(texts, masked=masked) == pytest.approx(scorer.score(texts, masked=masked))


@pytest.mark.parametrize(
    ("settings", "named"),
    [
        ({"char_head": True, "score": "characters"}, "needs stages.judge.train.model.sees_mask"),
        ({"sees_mask": True, "score": "characters"}, "stages.judge.train.char_loss"),
    ],
)
def test_bad_settings_are_named(settings, named):
    with pytest.raises(ConfigError, match=named):
        judge(**settings)


class Fixed:
    """A corruptor that always gives the same corrupted windows (what `JudgeModule` asks)."""

    def __init__(self, texts: list[str], masked: list[str]) -> None:
        self.made = Corrupted(texts, [1.0] * len(texts), [0.0] * len(texts), masked)

    def corrupt_weighted(self, rows, rng: random.Random) -> Corrupted:
        return self.made

    def masks(self, rows, rng: random.Random) -> list[str]:
        return [row["masked"] for row in rows]


def test_the_character_loss_joins_the_window_loss_with_its_weight():
    rows = [{"text": "the cat", "masked": "the c█t"}, {"text": "a dog", "masked": "a █og"}]
    corrupted = Fixed(["the cot", "a fog"], ["the c█t", "a █og"])
    losses = {}
    for weight in (0.0, 2.0):
        scorer = judge(sees_mask=True, char_head=True).train()
        module = JudgeModule(scorer, corrupted, SCHEDULE, 0, JudgeLoss(char_loss=weight))
        module.log = lambda *args, **kwargs: None
        losses[weight] = module.training_step(rows, 0)
    scorer = judge(sees_mask=True, char_head=True)
    texts = ["the cat", "a dog", "the cot", "a fog"]
    ids, marks = scorer.encode(texts, ["the c█t", "a █og"] * 2)
    chars = scorer.outputs(ids, marks)[1]
    # the filled characters: a, d (real, own) then o, f (corrupted, not the text's)
    logits = torch.stack([chars[0, 5], chars[1, 2], chars[2, 5], chars[3, 2]])
    by_hand = torch.nn.functional.binary_cross_entropy_with_logits(
        logits, torch.tensor([1.0, 1.0, 0.0, 0.0])
    )
    assert (losses[2.0] - losses[0.0]).item() == pytest.approx(2 * by_hand.item(), rel=1e-5)
    losses[2.0].backward()
    head = module.judge.char_head
    assert head is not None and head.weight.grad is not None and head.weight.grad.abs().sum() > 0


def test_without_the_window_loss_or_the_real_windows_only_the_fills_characters_count():
    rows = [{"text": "the cat", "masked": "the c█t"}, {"text": "a dog", "masked": "a █og"}]
    corrupted = Fixed(["the cot", "a fog"], ["the c█t", "a █og"])
    scorer = judge(sees_mask=True, char_head=True).train()
    loss = JudgeLoss(char_loss=1.0, window_loss=0.0, char_on_real=False)
    module = JudgeModule(scorer, corrupted, SCHEDULE, 0, loss)
    module.log = lambda *args, **kwargs: None
    loss = module.training_step(rows, 0)
    texts = ["the cat", "a dog", "the cot", "a fog"]
    ids, marks = scorer.encode(texts, ["the c█t", "a █og"] * 2)
    chars = scorer.outputs(ids, marks)[1]
    by_hand = torch.nn.functional.binary_cross_entropy_with_logits(
        torch.stack([chars[2, 5], chars[3, 2]]), torch.zeros(2)
    )  # the corrupted fills' o and f, neither the text's
    assert loss.item() == pytest.approx(by_hand.item(), rel=1e-5)


def test_a_judge_continued_keeps_the_character_loss_it_was_trained_with(tmp_path):
    judge().save(tmp_path / "window_judge")  # no character head
    settings = {
        "model": {}, "negatives": {"generated": 1.0}, "temperatures": [0.0], "max_swaps": 1,
        "max_steps": 1, "batch_size": 1, "optimizer": torch.optim.AdamW, "warmup_steps": 0,
        "eval_every_n_steps": 1,
    }  # fmt: skip
    with pytest.raises(ConfigError, match="stages.judge.train.char_loss=1.0 does not fit"):
        train_judge(
            tmp_path / "next", OmegaConf.create({"seed": 0}), None, [],
            init=str(tmp_path / "window_judge"), char_loss=1.0, **settings,
        )  # fmt: skip
