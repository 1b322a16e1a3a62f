"""The MedMCQA recipe end to end with the tiny model: train, each stage, the whole pipeline."""

from __future__ import annotations

import json
from pathlib import Path

import mlflow
import pytest
import torch
from hydra.utils import instantiate

from src.data.files import DataFileError
from src.data.hub import SAMPLES_DIR
from src.eval import evaluate, head_folders
from src.evaluation.settings import EvalSettings
from src.model.causal_lm import load_causal_lm
from src.pipeline import run_pipeline
from src.train import train
from src.utils.errors import ConfigError
from src.utils.resolvers import PROJECT_ROOT
from tests.helpers.command import command
from tests.helpers.compare import greedy_answers
from tests.helpers.mlflow_runs import nothing_recorded

# The tiny model on the shipped sample: 2 questions x 2 completions, a few tokens each.
SMALL = [
    "model=tiny",
    "trainer.max_steps=2",
    "trainer.val_check_interval=2",
    "data.batch_size=2",
    "data.max_val_rows=4",
    "data.eval_batch_size=4",
    "algo.group_size=2",
    "algo.max_completion_length=6",
    "sft.max_steps=2",
    "sft.batch_size=2",
    "sft.check_size=2",
    "sft.check_every_n_steps=2",
    "room.k=2",
    "room.eval_rows=4",
]
REWARD_METRICS = ["accuracy", "format", "well_formed", "similarity"]


def runs_of(output_root: Path, experiment: str) -> tuple[mlflow.MlflowClient, list]:
    client = mlflow.MlflowClient(tracking_uri=f"sqlite:///{output_root}/mlflow.db")
    found = client.get_experiment_by_name(experiment)
    return client, client.search_runs([found.experiment_id]) if found else []


@pytest.mark.slow
def test_train_command_medmcqa_solution_tag(tmp_path):
    result = command(
        "src.train",
        "task=medmcqa",
        "reward=solution_tag",
        "model=tiny",
        "trainer.max_steps=2",
        *SMALL[2:8],
        f"paths.output_root={tmp_path}",
    )
    assert result.returncode == 0, result.stderr[-3000:]
    client, (run,) = runs_of(tmp_path, "medmcqa")
    assert run.info.status == "FINISHED"
    for name in REWARD_METRICS:
        steps = [m.step for m in client.get_metric_history(run.info.run_id, f"rewards/{name}/mean")]
        assert steps == [1, 2], name
        assert [m.step for m in client.get_metric_history(run.info.run_id, f"eval/{name}")] == [
            0,
            2,
        ]
    assert run.data.tags["data_source"] == "sample:medmcqa_sample.jsonl"
    assert run.data.params["data_report.all.rows"] == "246"
    assert run.data.params["reward.weights.format"] == "0.5"
    assert "SYNTHETIC sample" in result.stdout + result.stderr
    (saved,) = tmp_path.glob("runs/medmcqa/*/model/config.json")  # the trained policy is kept


def test_medqa_task_trains(make_cfg):
    cfg = make_cfg("task=medqa", *SMALL)
    metrics = train(cfg)
    client, (run,) = runs_of(Path(cfg.paths.output_root), "medqa")
    assert run.data.tags["data_source"] == "sample:medqa_sample.jsonl"
    assert run.data.params["data_report.all.kept"] == "170"
    # Training saw MedQA questions with their four options, and its updates were real.
    questions = [
        json.loads(line)["question"] for line in (SAMPLES_DIR / "medqa_sample.jsonl").open()
    ]
    samples = json.loads(
        Path(client.download_artifacts(run.info.run_id, "samples/step_000001.json")).read_text()
    )
    (prompt_column,) = [i for i, name in enumerate(samples["columns"]) if name == "prompt"]
    for row in samples["data"]:
        assert any(question in row[prompt_column] for question in questions)
        assert "A. " in row[prompt_column] and "D. " in row[prompt_column]
    assert all(m.value > 0 for m in client.get_metric_history(run.info.run_id, "grad_norm"))
    # The held-out reward is the configured weighting of its parts.
    weights = cfg.reward.weights
    parts = {name: metrics[f"eval/{name}"] for name in cfg.reward.functions}
    assert metrics["eval/reward"] == pytest.approx(
        sum(weights.get(name, 1.0) * value for name, value in parts.items())
    )
    assert parts["printable"] > 0  # a non-zero part, so a wrong weighting shows


def test_bad_rows_fail_before_any_model_loads(make_cfg, tmp_path):
    good = json.loads((PROJECT_ROOT / "src/data/samples/medmcqa_sample.jsonl").open().readline())
    path = tmp_path / "medmcqa.jsonl"
    path.write_text("\n".join(json.dumps({**good, "cop": c}) for c in (0, 1, 7)) + "\n")
    cfg = make_cfg("task=medmcqa", *SMALL, f"data.path={path}", "data.val_size=1")
    with pytest.raises(DataFileError, match=rf"{path}:3: cop=7 is out of range"):
        train(cfg)
    assert nothing_recorded(cfg)


def test_one_based_file_and_dropped_rows_are_recorded(make_cfg, tmp_path):
    good = json.loads((PROJECT_ROOT / "src/data/samples/medmcqa_sample.jsonl").open().readline())
    rows = [{**good, "cop": 1 + i % 4} for i in range(6)] + [{**good, "opb": ""}]
    path = tmp_path / "one_based.jsonl"
    path.write_text("\n".join(json.dumps(row) for row in rows) + "\n")
    cfg = make_cfg(
        "task=medmcqa", *SMALL, f"data.path={path}", "data.schema.label_base=1", "data.val_size=2"
    )
    train(cfg)
    _, (run,) = runs_of(tmp_path / "outputs", "medmcqa")
    assert run.data.params["data_report.all.dropped.missing option"] == "1"
    assert run.data.params["data_report.all.kept"] == "6"


def test_eval_needs_a_head_to_score(make_cfg):
    cfg = make_cfg("task=medmcqa", *SMALL)
    with pytest.raises(FileNotFoundError, match="none of the heads"):
        head_folders(EvalSettings.of_section(cfg.eval), ["sft", "grpo"])
    with pytest.raises(ConfigError, match="eval.adapters.mine=FOLDER"):
        head_folders(EvalSettings.of_section(cfg.eval), ["base", "mine"])


def test_a_head_given_a_folder_that_does_not_exist_is_an_error(make_cfg, tmp_path):
    saved = tmp_path / "runs" / "one" / "model"
    saved.mkdir(parents=True)
    (saved / "config.json").write_text("{}")
    wrong = tmp_path / "runs" / "one" / "modle"
    cfg = make_cfg("task=medmcqa", *SMALL, f"eval.adapters.grpo={wrong}")
    with pytest.raises(FileNotFoundError, match=r"eval.adapters.grpo: no saved model at .*modle"):
        head_folders(EvalSettings.of_section(cfg.eval), ["base", "grpo"])
    with pytest.raises(FileNotFoundError, match=f"saved models in .*: {saved}"):
        head_folders(EvalSettings.of_section(cfg.eval), ["base", "grpo"])
    # the default folders, stages not trained yet, are skipped with a warning
    assert list(
        head_folders(
            EvalSettings.of_section(make_cfg("task=medmcqa", *SMALL).eval), ["base", "sft"]
        )
    ) == ["base"]


def test_a_stage_without_prep_says_what_to_run(make_cfg):
    cfg = make_cfg("task=medmcqa", *SMALL, "pipeline.stage=grpo")
    with pytest.raises(FileNotFoundError, match="pipeline.stage=prep"):
        run_pipeline(cfg)
    with pytest.raises(ValueError, match="pipeline.stage must be one of all, prep, baseline"):
        run_pipeline(make_cfg("task=medmcqa", "pipeline.stage=everything"))


@pytest.mark.slow
def test_eval_command_scores_the_base_model(tmp_path):
    result = command(
        "src.eval", "task=medmcqa", *SMALL, "eval.heads=[base]", f"paths.output_root={tmp_path}"
    )
    assert result.returncode == 0, result.stderr[-3000:]
    (results,) = tmp_path.glob("runs/medmcqa/*/eval_results.jsonl")
    records = [json.loads(line) for line in results.read_text().splitlines()]
    assert len(records) == 4 and {r["head"] for r in records} == {"base"}
    assert {"generation", "extracted", "gold", "accuracy", "format"} <= set(records[0])
    client, (run,) = runs_of(tmp_path, "medmcqa")
    assert run.data.tags["stage"] == "eval"
    assert "eval/base/accuracy" in run.data.metrics
    artifacts = {a.path for a in client.list_artifacts(run.info.run_id)}
    assert {"eval_results.jsonl", "eval_summary.json", "config.yaml"} <= artifacts


@pytest.mark.slow
def test_whole_pipeline_command(tmp_path):
    result = command(
        "src.pipeline",
        "task=medmcqa",
        *SMALL,
        "hardware=[cpu,lora]",
        f"paths.output_root={tmp_path}",
    )
    assert result.returncode == 0, result.stderr[-3000:]
    folder = tmp_path / "pipeline" / "medmcqa"
    report = json.loads((folder / "data" / "prep_report.json").read_text())
    assert report["source"] == "sample:medmcqa_sample.jsonl" and report["val_rows"] == 4
    assert (folder / "sft" / "adapter_config.json").is_file()
    assert (folder / "grpo" / "adapter_config.json").is_file()
    records = [json.loads(line) for line in (folder / "eval" / "eval_results.jsonl").open()]
    assert [r["head"] for r in records] == ["base"] * 4 + ["sft"] * 4 + ["grpo"] * 4
    summary = json.loads((folder / "eval" / "eval_summary.json").read_text())
    assert set(summary) == {"base", "sft", "grpo"} and summary["sft"]["rows"] == 4
    baseline = json.loads((folder / "baseline" / "eval_summary.json").read_text())
    assert baseline["base"] == summary["base"]  # same questions, same greedy answers
    _, runs = runs_of(tmp_path, "medmcqa")
    stages = sorted(run.data.tags["stage"] for run in runs)
    assert stages == ["baseline", "eval", "grpo", "prep", "sft"]
    assert {run.info.status for run in runs} == {"FINISHED"}


def test_evaluate_scores_a_saved_full_model_not_the_base(make_cfg, tmp_path, tiny_lm):
    saved = tmp_path / "saved"  # a full model that answers differently from the base model
    other = load_causal_lm(tiny_lm.network.name_or_path)
    torch.manual_seed(0)
    with torch.no_grad():
        for param in other.parameters():
            param.add_(0.05 * torch.randn_like(param))
    other.save(saved)
    cfg = make_cfg("task=medmcqa", *SMALL, f"+eval.adapters.trained={saved}")
    summary = evaluate(cfg, heads=["base", "trained"], output_dir=tmp_path / "ev")
    records = [json.loads(line) for line in (tmp_path / "ev" / "eval_results.jsonl").open()]
    assert [r["head"] for r in records] == ["base"] * 4 + ["trained"] * 4
    base, trained = records[:4], records[4:]

    data = instantiate(cfg.data)
    data.prepare_rows()
    prompts = instantiate(cfg.policy).prompts(data.val_rows[:4], other.tokenizer)
    expected = greedy_answers(saved, prompts, cfg.algo.max_completion_length)
    assert [r["generation"] for r in trained] == expected
    assert [r["generation"] for r in base] != expected  # so loading the base would fail
    for name in ("reward", "accuracy", "format", "similarity", "printable"):
        assert summary["trained"][name] == pytest.approx(sum(r[name] for r in trained) / 4)


@pytest.mark.slow
def test_evaluate_samples_every_head_and_gives_the_room_closed(make_cfg, tmp_path, tiny_lm):
    cfg = make_cfg(
        "task=medmcqa", *SMALL, "room.k=3", f"+eval.adapters.same={tiny_lm_folder(tiny_lm)}"
    )
    summary = evaluate(cfg, heads=["base", "same"], output_dir=tmp_path / "ev")
    for head in ("base", "same"):
        assert {"room/pass_at_1", "room/maj_at_k", "room/pass_at_k", "room/room"} <= set(
            summary[head]
        )
        assert "room/well_formed" in summary[head]  # solution_tag's form part
    # the same weights sampled from the same seed: the same figures, and no room closed
    assert summary["same"]["room/pass_at_1"] == summary["base"]["room/pass_at_1"]
    closed = summary["same"].get("room/room_closed")
    assert closed is not None and (closed != closed or closed == 0.0)  # NaN where no room


def tiny_lm_folder(tiny_lm) -> str:
    return str(tiny_lm.network.name_or_path)
