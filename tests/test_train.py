"""End-to-end: the real config, composed and shrunk, trains and leaves its record in MLflow."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import lightning
import mlflow
import pytest
from hydra.errors import InstantiationException

from src.data.files import DataFileError
from src.train import train
from src.utils.resolvers import PROJECT_ROOT

STEP_METRICS = [
    "reward",
    "reward_std",
    "rewards/accuracy/mean",
    "rewards/accuracy/std",
    "frac_reward_zero_std",
    "kl",
    "entropy",
    "clip_ratio/low_mean",
    "clip_ratio/high_mean",
    "clip_ratio/region_mean",
    "completions/mean_length",
    "completions/clipped_ratio",
    "num_tokens",
    "step_time",
    "loss",
    "grad_norm",
    "skipped_steps",
    "rewards/accuracy/errors",
    "learning_rate",
]


def only_run(cfg) -> mlflow.entities.Run:
    client = mlflow.MlflowClient(tracking_uri=cfg.paths.mlflow_uri)
    experiment = client.get_experiment_by_name(cfg.task_name)
    runs = client.search_runs([experiment.experiment_id])
    assert len(runs) == 1
    return runs[0]


def metric_steps(cfg, run, name) -> list[int]:
    client = mlflow.MlflowClient(tracking_uri=cfg.paths.mlflow_uri)
    return sorted(m.step for m in client.get_metric_history(run.info.run_id, name))


def test_two_grpo_steps_leave_a_full_mlflow_record(make_cfg):
    cfg = make_cfg()
    train(cfg)
    run = only_run(cfg)
    for name in STEP_METRICS:
        assert metric_steps(cfg, run, name) == [1, 2], name
    assert metric_steps(cfg, run, "eval/accuracy") == [0, 2]
    assert run.data.params["algo.group_size"] == "4"
    assert run.data.params["model.builder.hidden_size"] == "128"
    assert "algo._target_" not in run.data.params
    tags = run.data.tags
    assert tags["task"] == "arithmetic"
    assert (
        tags["policy"] == "generator" and tags["reward"] == "accuracy" and tags["model"] == "tiny"
    )
    assert len(tags["git_commit"]) >= 7
    client = mlflow.MlflowClient(tracking_uri=cfg.paths.mlflow_uri)
    artifacts = {a.path for a in client.list_artifacts(run.info.run_id)}
    assert "config.yaml" in artifacts
    samples = [a.path for a in client.list_artifacts(run.info.run_id, "samples")]
    assert samples == ["samples/step_000001.json", "samples/step_000002.json"]
    table = json.loads(Path(client.download_artifacts(run.info.run_id, samples[0])).read_text())
    assert {"prompt", "completion", "reward", "accuracy", "advantage"} <= set(table["columns"])
    assert len(table["data"]) == 2 * 4  # B prompts x G completions


def test_kl_lora_and_several_iterations(make_cfg):
    cfg = make_cfg(
        "hardware=[cpu,lora]", "algo.kl_beta=0.1", "algo.num_iterations=2", "trainer.max_steps=4"
    )
    train(cfg)
    run = only_run(cfg)
    assert metric_steps(cfg, run, "loss") == [1, 2, 3, 4]
    client = mlflow.MlflowClient(tracking_uri=cfg.paths.mlflow_uri)
    kl = [m.value for m in client.get_metric_history(run.info.run_id, "kl")]
    assert kl[0] == pytest.approx(0.0, abs=1e-6)  # the first update starts at the reference
    assert run.data.params["model.lora.r"] == "16"


def test_frozen_reference_copy_without_lora(make_cfg):
    cfg = make_cfg("algo.kl_beta=0.05", "algo.loss_type=dr_grpo", "algo.scale_rewards=none")
    metrics = train(cfg)
    assert "kl" in metrics


def test_local_data_file(make_cfg, tmp_path):
    path = tmp_path / "sums.jsonl"
    rows = [{"question": f"What is {a} + 1?", "answer": str(a + 1)} for a in range(20)]
    path.write_text("\n".join(json.dumps(row) for row in rows))
    cfg = make_cfg(f"data.path={path}", "data.val_size=4", "trainer.max_steps=1")
    metrics = train(cfg)
    assert 0.0 <= metrics["eval/accuracy"] <= 1.0


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("", "holds no rows"),
        (
            '{"question": "What is 1 + 1?", "answer": "2"}\n{"question": broken\n',
            "sums.jsonl:2: malformed JSON",
        ),
        ('{"question": "What is 1 + 1?"}\n', "line 1: missing field(s) ['answer']"),
    ],
)
def test_bad_data_file_names_file_and_line(make_cfg, tmp_path, content, message):
    path = tmp_path / "sums.jsonl"
    path.write_text(content)
    cfg = make_cfg(f"data.path={path}")
    with pytest.raises(
        DataFileError,
        match=message.replace("(", r"\(")
        .replace(")", r"\)")
        .replace("[", r"\[")
        .replace("]", r"\]"),
    ):
        train(cfg)
    assert not (tmp_path / "outputs" / "mlflow.db").exists()  # failed before anything was written


def run_cli(*args: str, cwd=PROJECT_ROOT) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "src.train", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=600,
    )


def cli_run_record(result: subprocess.CompletedProcess, output_root: Path):
    """The MLflow client and the one run a successful command left under output_root."""
    assert result.returncode == 0, result.stderr[-3000:]
    client = mlflow.MlflowClient(tracking_uri=f"sqlite:///{output_root}/mlflow.db")
    (run,) = client.search_runs([client.get_experiment_by_name("arithmetic").experiment_id])
    return client, run


def test_cfg_job_prints_the_config():
    result = run_cli("--cfg", "job")
    assert result.returncode == 0, result.stderr
    assert "group_size: 8" in result.stdout and "task_name: arithmetic" in result.stdout


def test_unknown_reward_names_the_value():
    result = run_cli("reward=no_such_reward")
    assert result.returncode != 0
    assert "Could not find 'reward/no_such_reward'" in result.stderr


def test_command_line_overrides(tmp_path):
    result = run_cli(
        "algo.kl_beta=0.1",
        "algo.group_size=4",
        "trainer.max_steps=3",
        "model=tiny",
        "sft.enabled=false",
        "data.batch_size=2",
        "data.val_size=16",
        f"paths.output_root={tmp_path}",
    )
    client, run = cli_run_record(result, tmp_path)
    assert run.data.params["algo.kl_beta"] == "0.1"
    assert [m.step for m in client.get_metric_history(run.info.run_id, "kl")] == [1, 2, 3]


def test_a_run_that_fails_is_marked_failed(make_cfg, tmp_path):
    cfg = make_cfg(f"model.name_or_path={tmp_path / 'missing_model'}", "model.builder=null")
    with pytest.raises(InstantiationException, match="no model folder at .*missing_model"):
        train(cfg)
    run = only_run(cfg)
    assert run.info.status == "FAILED"
    assert run.data.params["model.name_or_path"].endswith("missing_model")  # the record survives


def test_four_bit_lora_spelling(make_cfg):
    cfg = make_cfg("hardware=[4bit,lora]", "algo.kl_beta=0.04")
    assert cfg.model.load_in_4bit and cfg.model.lora.r == 16
    metrics = train(cfg)
    assert metrics["kl"] >= 0.0
    assert metric_steps(cfg, only_run(cfg), "loss") == [1, 2]


def test_command_line_data_path(tmp_path):
    path = tmp_path / "sums.json"
    path.write_text(
        json.dumps([{"question": f"What is {a} + 2?", "answer": str(a + 2)} for a in range(12)])
    )
    result = run_cli(
        f"data.path={path}",
        "data.val_size=4",
        "sft.enabled=false",
        "trainer.max_steps=1",
        "algo.max_completion_length=4",
        f"paths.output_root={tmp_path}",
    )
    client, run = cli_run_record(result, tmp_path)
    assert run.data.params["data.path"] == str(path)
    # Hydra's job log is in the run folder, not the project root.
    assert len(list(tmp_path.glob("runs/arithmetic/*/train.log"))) == 1
    assert not (PROJECT_ROOT / "train.log").exists()
    assert [m.step for m in client.get_metric_history(run.info.run_id, "eval/accuracy")] == [0, 1]


def test_run_stays_running_until_the_experiment_ends(make_cfg, monkeypatch):
    statuses = []
    original_fit = lightning.Trainer.fit

    def fit_and_look(trainer, *args, **kwargs):
        statuses.append(only_run(cfg).info.status)  # after the step-0 evaluation
        return original_fit(trainer, *args, **kwargs)

    cfg = make_cfg()
    monkeypatch.setattr(lightning.Trainer, "fit", fit_and_look)
    train(cfg)
    assert statuses == ["RUNNING"]
    assert only_run(cfg).info.status == "FINISHED"


def test_max_steps_inside_a_rollouts_updates(make_cfg):
    cfg = make_cfg("algo.num_iterations=2", "trainer.max_steps=3")
    train(cfg)
    assert metric_steps(cfg, only_run(cfg), "loss") == [1, 2, 3]


def test_hardware_choices_reach_trainer_and_model(make_cfg):
    gpu = make_cfg("hardware=[gpu,4bit,lora]")
    assert gpu.trainer.accelerator == "gpu" and gpu.trainer.precision == "bf16-true"
    assert gpu.model.dtype == "bfloat16" and gpu.model.load_in_4bit and gpu.model.lora.r == 16
    cpu = make_cfg()
    assert (
        cpu.trainer.accelerator == "cpu" and cpu.model.lora is None and not cpu.model.load_in_4bit
    )
