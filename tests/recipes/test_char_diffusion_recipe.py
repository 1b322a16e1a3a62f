"""End-to-end: `task=char_diffusion` from nothing (generator pretraining, judge, GRPO) in one
MLflow run, cached stages on the second run, a dry run that trains nothing, and the GRPO module
training the character model and a causal LM through the same code path."""

from __future__ import annotations

import json
import re
from pathlib import Path

import lightning as L
import mlflow
import pytest
import torch

from src.grpo.module import GRPOModule
from src.pretraining.folders import stage_checkpoint
from src.pretraining.stages import run_stages
from src.recipes.char_diffusion.judge_network import load_char_judge
from src.recipes.char_diffusion.network import load_char_diffusion
from src.runs.parts import build_run_parts, grpo_module
from src.train import train
from src.utils.config import build
from src.utils.errors import UserError, unwrapped
from tests.helpers.char_diffusion import SMALL
from tests.helpers.mlflow_runs import history, runs

RECIPE_NAMES = ("pg_loss", "kl_penalty", "mean_reward", "std_reward", "mean_advantage", "mean_kl")


@pytest.mark.slow
def test_the_recipe_runs_from_nothing_then_reuses_its_stages(make_cfg):
    cfg = make_cfg(*SMALL, tiny=False)
    train(cfg)
    first = runs(cfg)[-1]
    assert history(cfg, first, "generator/loss") and history(cfg, first, "judge/loss")
    assert history(cfg, first, "generator/val_char_accuracy")
    assert history(cfg, first, "judge/val_accuracy_generated")
    for name in (*RECIPE_NAMES, "mean_log_prob", "reward", "kl", "entropy", "role/char_accuracy"):
        assert sorted(history(cfg, first, name)) == [1, 2], name
    assert history(cfg, first, "mean_reward") == history(cfg, first, "reward")
    assert history(cfg, first, "mean_log_prob")[1] < 0
    for name in ("eval/judge", "eval/role/char_accuracy"):
        assert sorted(history(cfg, first, name)) == [0, 2], name
    assert all(0 <= v <= 1 for v in history(cfg, first, "eval/judge").values())
    # The share of the room closed: from the fills' score at step 0 to the real windows'.
    judge, gold = history(cfg, first, "eval/judge"), history(cfg, first, "eval/judge_gold")
    closed = history(cfg, first, "eval/judge_room_closed")
    assert sorted(closed) == [0, 2] and closed[0] == 0.0
    assert closed[2] == pytest.approx((judge[2] - judge[0]) / (gold[2] - judge[0]))
    generator = Path(first.data.tags["stage.generator"])
    judge = Path(first.data.tags["stage.judge"])
    assert json.loads((generator / "stage.json").read_text())["steps"] == 6
    assert (generator / "early" / "weights.pt").is_file()
    # The samples table: the masked input, the fill-in, the filled window and its judge score.
    client = mlflow.MlflowClient(tracking_uri=cfg.paths.mlflow_uri)
    table = json.loads(
        Path(client.download_artifacts(first.info.run_id, "samples/step_000001.json")).read_text()
    )
    row = dict(zip(table["columns"], table["data"][0], strict=True))
    assert row["prompt"].count("█") == len(row["completion"]) == 6
    assert "█" not in row["filled"] and row["reward"] == row["judge"]

    modified = (generator / "weights.pt").stat().st_mtime, (judge / "weights.pt").stat().st_mtime
    train(cfg)
    second = runs(cfg)[-1]
    assert second.info.run_id != first.info.run_id
    assert not history(cfg, second, "generator/loss") and not history(cfg, second, "judge/loss")
    assert second.data.tags["stage.judge"] == str(judge)
    assert modified == (
        (generator / "weights.pt").stat().st_mtime,
        (judge / "weights.pt").stat().st_mtime,
    )
    assert sorted(history(cfg, second, "eval/judge")) == [0, 2]


def test_a_judge_that_sees_the_mask_trains_and_scores_each_rows_masked_window(make_cfg):
    cfg = make_cfg(*SMALL, "stages.judge.train.model.sees_mask=true", tiny=False)
    parts = build_run_parts(cfg)
    run_stages(cfg, parts.datamodule, [])
    judge = load_char_judge(stage_checkpoint("judge", cfg))
    assert judge.sees_mask
    rows = parts.datamodule.val_rows[:4]
    texts = [row["text"] for row in rows]  # fills that restore every character
    scores = build(cfg.reward.functions.judge)(texts, rows)
    assert scores == pytest.approx(judge.score(texts, masked=[row["masked"] for row in rows]))
    assert scores != pytest.approx(judge.score(texts, masked=texts))  # nothing marked differs


def test_a_judge_from_the_generator_is_the_generators_size_and_a_bad_value_is_named(make_cfg):
    cfg = make_cfg(*SMALL, "stages.judge.train.from_generator=true", tiny=False)
    parts = build_run_parts(cfg)
    run_stages(cfg, parts.datamodule, [])
    judge = load_char_judge(stage_checkpoint("judge", cfg))
    generator = load_char_diffusion(stage_checkpoint("generator", cfg))
    shape = ("hidden_size", "num_layers", "num_heads", "intermediate_size")
    assert [judge.settings[key] for key in shape] == [generator.settings[key] for key in shape]
    bad = make_cfg(*SMALL, "stages.judge.train.from_generator=yes", tiny=False)
    with pytest.raises(UserError, match="stages.judge.train.from_generator must be true or false"):
        run_stages(bad, build_run_parts(bad).datamodule, [])


def test_a_judge_scoring_characters_trains_its_character_head_and_is_the_reward(make_cfg):
    settings = ("model.sees_mask=true", "char_loss=1.0", "model.score=characters")
    cfg = make_cfg(*SMALL, *[f"stages.judge.train.{s}" for s in settings], tiny=False)
    parts = build_run_parts(cfg)
    run_stages(cfg, parts.datamodule, [])
    judge = load_char_judge(stage_checkpoint("judge", cfg))
    assert judge.char_head is not None and judge.settings["score"] == "characters"
    stage = json.loads((Path(stage_checkpoint("judge", cfg)) / "stage.json").read_text())
    assert 0 <= stage["judge/val_char_accuracy_generated"] <= 1
    rows = parts.datamodule.val_rows[:4]
    texts = [row["text"] for row in rows]
    scores = build(cfg.reward.functions.judge)(texts, rows)
    assert scores == pytest.approx(judge.score(texts, masked=[row["masked"] for row in rows]))
    for setting, named in (
        ("char_loss=-1", "stages.judge.train.char_loss must be a number >= 0"),
        ("window_loss=0", "stages.judge.train.window_loss must be above 0 unless"),
        ("char_on_real=maybe", "stages.judge.train.char_on_real must be true or false"),
    ):
        bad = make_cfg(*SMALL, f"stages.judge.train.{setting}", tiny=False)
        with pytest.raises(UserError, match=named):
            run_stages(bad, build_run_parts(bad).datamodule, [])


@pytest.mark.parametrize(
    ("wrong", "named"),
    [
        ("stages.judge.train.model.score=windw", "model.score must be one of window, characters"),
        ("+stages.judge.train.char_los=0.1", "char_los is not a setting of the judge stage"),
        ("stages.judge.train.negatives.generated=abc", "negatives.generated must be a number"),
        ("stages.judge.train.temperatures=0.5", "temperatures must be a non-empty list"),
        ("stages.judge.train.model.num_heads=3", "num_heads must divide"),
        ("stages.judge.train.window_loss=0", "window_loss must be above 0 unless"),
        ("+stages.generator.train.max_step=3", "max_step is not a setting of the generator"),
    ],
)
def test_a_wrong_stage_setting_is_refused_before_any_stage_trains(make_cfg, wrong, named):
    """The judge's settings are refused with the rest, in one line naming the key, before
    the generator stage (minutes of training) starts: no stage folder is made."""
    cfg = make_cfg(*SMALL, wrong, tiny=False)
    with pytest.raises(UserError, match=re.escape(named)):
        build_run_parts(cfg)
    assert not list(Path(cfg.paths.cache_dir).glob("char_*/*"))


def grpo_steps(cfg, monkeypatch) -> tuple[GRPOModule, dict[str, int], bool]:
    """Two GRPO steps built as `src.train` builds them; calls of each network method, and
    whether any trained weight moved."""
    parts = build_run_parts(cfg)
    run_stages(cfg, parts.datamodule, [])
    lm = build(cfg.model)
    calls: dict[str, int] = {}
    for name in ("log_probs", "encode_prompts", "frozen_reference", "trainable_parameters"):
        method = getattr(type(lm), name)

        def counted(self, *args, _method=method, _name=name, **kwargs):
            if self is lm:  # not the frozen reference, another instance of the class
                calls[_name] = calls.get(_name, 0) + 1
            return _method(self, *args, **kwargs)

        monkeypatch.setattr(type(lm), name, counted)
    module = grpo_module(parts, lm)
    before = [p.detach().clone() for p in lm.trainable_parameters()]
    trainer = L.Trainer(
        max_steps=2, logger=False, enable_checkpointing=False, enable_progress_bar=False,
        enable_model_summary=False, num_sanity_val_steps=0, limit_val_batches=0,
    )  # fmt: skip
    trainer.fit(module, datamodule=parts.datamodule)
    moved = any(
        not torch.equal(a, b) for a, b in zip(before, lm.trainable_parameters(), strict=True)
    )
    return module, calls, moved


@pytest.mark.slow
def test_one_grpo_module_trains_the_character_model_and_a_causal_lm(make_cfg, monkeypatch):
    char_module, char_calls, char_moved = grpo_steps(
        make_cfg(*SMALL, "stages.generator.train.max_steps=2", "algo.kl_beta=0.1", tiny=False),
        monkeypatch,
    )
    causal_module, causal_calls, causal_moved = grpo_steps(
        make_cfg("algo.kl_beta=0.1"), monkeypatch
    )
    assert type(char_module) is type(causal_module) is GRPOModule
    assert type(char_module.lm).__name__ == "CharDiffusionNetwork"
    assert type(causal_module.lm).__name__ == "CausalLM"
    assert char_moved and causal_moved
    # The same protocol calls, as often: one path, whatever the network.
    assert char_calls == causal_calls and char_calls["log_probs"] == 2


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        ("short_text", r"short\.txt: 9 characters of text .* data\.window=24"),
        ("empty_text", r"empty\.txt: no text in it"),
        ("data.mask_ratio=1.5", r"data\.mask_ratio must be a number in \(0, 1\), got 1\.5"),
        ("rollout.denoising_steps=0", r"rollout\.denoising_steps must be a whole number >= 1"),
        ("judge_is_generator", r"judge_checkpoint=.*holds 'char_diffusion', not a char_judge"),
    ],
)
def test_bad_input_fails_before_anything_trains_naming_the_file_or_key(
    make_cfg, tmp_path, bad, message
):
    overrides = []
    if bad == "short_text":
        (tmp_path / "short.txt").write_text("too short")
        overrides.append(f"data.path={tmp_path / 'short.txt'}")
    elif bad == "empty_text":
        (tmp_path / "empty.txt").write_text("\n\n")
        overrides.append(f"data.path={tmp_path / 'empty.txt'}")
    elif bad == "judge_is_generator":
        load_char_diffusion(None, max_length=24, hidden_size=32, num_layers=1, num_heads=2).save(
            tmp_path / "generator"
        )
        overrides.append(f"judge_checkpoint={tmp_path / 'generator'}")
    else:
        overrides.append(bad)
    cfg = make_cfg(*SMALL, *overrides, tiny=False)
    with pytest.raises(Exception) as raised:
        train(cfg)
    error = unwrapped(raised.value)
    assert isinstance(error, UserError) and re.search(message, str(error)), str(error)
    assert not Path(cfg.paths.cache_dir).exists()  # no stage started


def test_the_bf16_preset_resolves_for_the_char_generator(monkeypatch) -> None:
    """hardware=[cpu,bf16] sets model.dtype=bfloat16_if_fast: the char generator takes what
    the processor's verdict says, as the causal models do."""
    from src.recipes.char_diffusion import network

    shape = {"max_length": 24, "hidden_size": 32, "num_layers": 1, "num_heads": 2}
    for verdict, dtype in (("bfloat16", torch.bfloat16), ("float32", torch.float32)):
        monkeypatch.setattr(network, "resolved_dtype", lambda name, verdict=verdict: verdict)
        built = load_char_diffusion(None, dtype="bfloat16_if_fast", **shape)
        assert next(built.parameters()).dtype == dtype
