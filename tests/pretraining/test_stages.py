"""Stages before GRPO: their folders are named before anything loads (given, cached by their
settings, or untrained for a dry run), and a given folder of the wrong kind is refused."""

from __future__ import annotations

from pathlib import Path

import pytest

from src.eval import evaluate
from src.pretraining.folders import stage_checkpoint
from src.recipes.char_diffusion.judge_network import CharJudge
from src.recipes.char_diffusion.network import load_char_diffusion
from src.runs.parts import build_run_parts
from src.utils.errors import ConfigError, MissingFileError
from tests.helpers.char_diffusion import SMALL

TINY_NET = {"max_length": 24, "hidden_size": 32, "num_layers": 1, "num_heads": 2}


def folders(make_cfg, *overrides: str) -> tuple[str, str]:
    cfg = make_cfg(*SMALL, *overrides, tiny=False)
    return stage_checkpoint("generator", cfg), stage_checkpoint("judge", cfg)


def test_unset_checkpoints_become_cache_folders_keyed_by_what_shapes_them(make_cfg):
    generator, judge = folders(make_cfg)
    assert Path(generator).parent.name == "char_generator" and "generator-" in generator
    assert Path(judge).parent.name == "char_judge"
    assert folders(make_cfg, "trainer.max_steps=7", "data.batch_size=3") == (generator, judge)
    other_masks = folders(make_cfg, "data.mask_ratio=0.5")
    assert other_masks[0] != generator and other_masks[1] != judge  # the judge follows
    other_judge = folders(make_cfg, "stages.judge.train.max_steps=9")
    assert other_judge == (generator, other_judge[1]) and other_judge[1] != judge
    assert folders(make_cfg, "rollout.temperature=1.0")[0] == generator  # judge negatives only


def test_a_dry_run_with_nothing_cached_uses_untrained_folders_in_the_run(make_cfg, tmp_path):
    generator, judge = folders(make_cfg, "dry_run=true")
    assert generator == str(tmp_path / "run" / "untrained" / "generator")
    assert judge == str(tmp_path / "run" / "untrained" / "judge")


def test_given_folders_are_used_as_they_are(make_cfg, tmp_path):
    load_char_diffusion(None, **TINY_NET).save(tmp_path / "mine")
    CharJudge(**TINY_NET).save(tmp_path / "my_judge")
    given = (str(tmp_path / "mine"), str(tmp_path / "my_judge"))
    assert (
        folders(make_cfg, f"generator_checkpoint={given[0]}", f"judge_checkpoint={given[1]}")
        == given
    )


def test_a_judge_checkpoint_of_the_wrong_kind_fails_before_any_data_or_model(make_cfg, tmp_path):
    load_char_diffusion(None, **TINY_NET).save(tmp_path / "generator")
    cfg = make_cfg(*SMALL, f"judge_checkpoint={tmp_path / 'generator'}", tiny=False)
    with pytest.raises(ConfigError, match=r"judge_checkpoint=.*'char_diffusion', not a char_judge"):
        build_run_parts(cfg)
    cfg = make_cfg(*SMALL, f"generator_checkpoint={tmp_path / 'nothing'}", tiny=False)
    with pytest.raises(MissingFileError, match="generator_checkpoint=.*no such folder"):
        build_run_parts(cfg)


def test_scoring_a_recipe_whose_stages_are_not_trained_names_the_stage_and_what_to_run(
    make_cfg, tmp_path
):
    load_char_diffusion(None, **TINY_NET).save(tmp_path / "mine")
    cfg = make_cfg(*SMALL, f"generator_checkpoint={tmp_path / 'mine'}", tiny=False)
    with pytest.raises(MissingFileError) as caught:
        evaluate(cfg, heads=["base"], output_dir=tmp_path / "eval")
    message = str(caught.value)
    assert message.startswith("stage judge is not trained under these settings (")
    assert "python -m src.train with the same overrides trains it" in message
    assert "judge_checkpoint=FOLDER" in message and "\n" not in message


def test_a_stage_the_run_lacks_is_named_with_the_stages_it_has(make_cfg):
    cfg = make_cfg(*SMALL, tiny=False)
    with pytest.raises(ConfigError, match=r"^\$\{stage:critic\}: this run has no stage critic"):
        stage_checkpoint("critic", cfg)
    assert cfg.model.checkpoint == stage_checkpoint("generator", cfg)  # ${stage:generator}
