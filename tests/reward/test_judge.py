"""`reward=judge`: a trained character judge or a Hugging Face sequence classifier scores the
outcomes; a missing or wrong model is a setting error, not a failed outcome."""

from __future__ import annotations

import pytest
import torch

from src.model.sequence_classifier import SequenceClassifierScorer
from src.recipes.char_diffusion.judge_network import CharJudge
from src.recipes.char_diffusion.judge_reward import CharJudgeReward
from src.recipes.char_diffusion.network import load_char_diffusion
from src.reward.combine import CombinedReward
from src.reward.judge import JudgeReward
from src.runs.parts import build_run_parts
from src.utils.errors import ConfigError
from tests.model.test_sequence_classifier import save_tiny_classifier

SMALL = {"max_length": 24, "hidden_size": 32, "num_layers": 1, "num_heads": 2}
ROWS = [{"question": "What is 2 + 2?"}, {"question": "Name a colour."}]


def test_a_char_judge_folder_scores_windows_with_the_judges_probability(tmp_path):
    torch.manual_seed(0)
    judge = CharJudge(**SMALL)
    judge.save(tmp_path / "judge")
    reward = CharJudgeReward(str(tmp_path / "judge"), device="cpu")
    texts = ["the cat sat on the mat", "zq#x"]
    assert reward(texts, ROWS) == pytest.approx(judge.score(texts))


def test_a_judge_that_sees_the_mask_reads_each_rows_masked_window(tmp_path):
    torch.manual_seed(0)
    judge = CharJudge(**SMALL, sees_mask=True)
    judge.save(tmp_path / "judge")
    reward = CharJudgeReward(str(tmp_path / "judge"), prompt_field="masked", device="cpu")
    texts = ["the cat sat on the mat", "the cat sat on the mat"]
    rows = [{"masked": "the c█t sat on the mat"}, {"masked": "the cat sat on ██e mat"}]
    masked = [row["masked"] for row in rows]
    assert reward(texts, rows) == pytest.approx(judge.score(texts, masked=masked))


def test_a_sequence_classifier_scores_prompt_answer_pairs(tmp_path):
    folder = save_tiny_classifier(tmp_path / "rm", num_labels=1)
    direct = SequenceClassifierScorer(str(folder), device="cpu")
    reward = JudgeReward(str(folder), prompt_field="question", device="cpu")
    answers = ["4", "blue"]
    assert reward(answers, ROWS) == pytest.approx(
        direct.score(answers, [row["question"] for row in ROWS])
    )
    alone = JudgeReward(str(folder), device="cpu")
    assert alone(answers, ROWS) == pytest.approx(direct.score(answers))
    # the char_diffusion recipe's reward loads a Hugging Face reward model as the plain one does
    recipes = CharJudgeReward(str(folder), device="cpu")
    assert recipes(answers, ROWS) == pytest.approx(direct.score(answers))


def test_no_model_a_generator_folder_or_a_missing_field_are_setting_errors(tmp_path):
    with pytest.raises(ConfigError, match="reward.functions.judge.model is not set"):
        JudgeReward(None)
    load_char_diffusion(None, **SMALL).save(tmp_path / "generator")
    generator = str(tmp_path / "generator")
    combined = CombinedReward({"judge": CharJudgeReward(generator)}, on_error="zero")
    with pytest.raises(ConfigError, match="holds a 'char_diffusion' model, not a judge"):
        combined(["text"], ROWS[:1])
    CharJudge(**SMALL).save(tmp_path / "judge")
    # the plain judge reward loads Hugging Face reward models only, and says what does
    with pytest.raises(
        ConfigError, match="holds our own 'char_judge' network.*task=char_diffusion"
    ):
        JudgeReward(str(tmp_path / "judge"))(["text"], ROWS[:1])
    reward = CharJudgeReward(str(tmp_path / "judge"), prompt_field="prompt")
    with pytest.raises(ConfigError, match="prompt_field='prompt'"):
        reward(["text"], ROWS[:1])


def test_reward_judge_composes_for_a_language_model_task(make_cfg, tmp_path):
    folder = save_tiny_classifier(tmp_path / "rm", num_labels=2)
    cfg = make_cfg(
        "reward=judge",
        f"reward.functions.judge.model={folder}",
        "reward.functions.judge.prompt_field=question",
        "reward.functions.judge.device=cpu",
    )
    parts = build_run_parts(cfg)
    rows = parts.datamodule.train_rows[:2]
    scores = parts.reward(["85", "12"], rows)
    judged = scores.parts["judge"]
    assert judged.shape == (2,) and ((judged > 0) & (judged < 1)).all()
