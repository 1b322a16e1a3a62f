"""End-to-end: the real config, composed and shrunk, trains and leaves its record in MLflow."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import lightning
import mlflow
import pytest
from hydra.errors import InstantiationException
from hydra.utils import instantiate

import src.grpo.module as grpo_module
from src.data.files import DataFileError
from src.reward.accuracy import extract_final_number
from src.train import train
from src.utils.resolvers import PROJECT_ROOT
from tests.helpers.command import command
from tests.helpers.compare import greedy_answers
from tests.helpers.mlflow_runs import history, nothing_recorded, only_run

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
    "timing/sampling",
    "timing/reward",
    "timing/log_probs",
    "timing/update",
]


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


def test_kl_lora_and_several_iterations(make_cfg, monkeypatch):
    passes = []
    original = grpo_module.token_passes
    monkeypatch.setattr(
        grpo_module, "token_passes", lambda *a, **k: passes.append(original(*a, **k)) or passes[-1]
    )
    cfg = make_cfg(
        "hardware=[cpu,lora]",
        "algo.kl_beta=0.1",
        "algo.num_iterations=2",
        "trainer.max_steps=4",
        "algo.max_tokens_per_pass=48",  # the update of 2 prompts x 4 completions in passes
    )
    train(cfg)
    run = only_run(cfg)
    assert metric_steps(cfg, run, "loss") == [1, 2, 3, 4]
    assert all(math.isfinite(value) for value in history(cfg, run, "loss").values())
    assert len(passes) == 4 and all(len(p) >= 2 for p in passes)
    kl = history(cfg, run, "kl")
    assert kl[1] == pytest.approx(0.0, abs=1e-9)  # a fresh adapter: the policy is the reference
    # Later updates have moved away from the reference: the disabled adapter, not the policy
    # as it was when the rollout was sampled (step 3 is the first update of the 2nd rollout).
    assert kl[2] > 1e-5 and kl[3] > 1e-5 and kl[4] > 1e-5, kl
    assert run.data.params["model.lora.r"] == "16"


def test_frozen_reference_copy_without_lora(make_cfg):
    cfg = make_cfg("algo.kl_beta=0.05", "algo.loss_type=dr_grpo", "algo.scale_rewards=none")
    train(cfg)
    kl = history(cfg, only_run(cfg), "kl")
    assert kl[1] == 0.0  # the reference is a copy of the starting weights ...
    assert kl[2] > 1e-5  # ... which stays where it was while the policy moves


def test_local_data_file(make_cfg, tmp_path):
    path = tmp_path / "sums.jsonl"
    rows = [{"question": f"What is {a} + 1?", "answer": str(a + 1)} for a in range(20)]
    path.write_text("\n".join(json.dumps(row) for row in rows))
    cfg = make_cfg(f"data.path={path}", "data.val_size=4", "trainer.max_steps=1")
    train(cfg)
    run = only_run(cfg)
    params = run.data.params
    assert (params["data_report.all.rows"], params["data_report.train_rows"]) == ("20", "16")
    assert params["data_report.val_rows"] == "4"
    data = instantiate(cfg.data)
    data.prepare_rows()
    held_out = {row["question"] for row in data.val_rows}
    assert len(held_out) == 4 and held_out < {row["question"] for row in rows}
    # The step trained on the file's other questions, never on held-out ones.
    client = mlflow.MlflowClient(tracking_uri=cfg.paths.mlflow_uri)
    table = json.loads(
        Path(client.download_artifacts(run.info.run_id, "samples/step_000001.json")).read_text()
    )
    prompts = {row[table["columns"].index("prompt")] for row in table["data"]}
    assert len(prompts) == 2 and prompts <= set(instantiate(cfg.policy).prompts(data.train_rows))


@pytest.mark.slow
def test_held_out_accuracy_is_that_of_the_policys_greedy_answers(make_cfg, warm_tiny):
    """eval/accuracy at the start and at the end, recomputed here from the model folders by
    decoding each held-out question alone: the right rows, the right model, the right score."""
    cfg = make_cfg(*warm_tiny, "data.val_size=32", "algo.max_completion_length=8")
    train(cfg)
    accuracy = history(cfg, only_run(cfg), "eval/accuracy")
    assert sorted(accuracy) == [0, 2]
    data = instantiate(cfg.data)
    data.prepare_rows()
    prompts = instantiate(cfg.policy).prompts(data.val_rows)
    for step, folder in ((0, cfg.model.name_or_path), (2, cfg.save_model)):
        answers = greedy_answers(folder, prompts, cfg.algo.max_completion_length)
        right = [
            extract_final_number(answer) == row["answer"]
            for answer, row in zip(answers, data.val_rows, strict=True)
        ]
        assert accuracy[step] == pytest.approx(sum(right) / len(right)), step
    assert 0.1 < accuracy[0] < 0.9  # some right and some wrong: another row or model would show


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
    assert nothing_recorded(cfg)  # failed before anything was written


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
    result = command("src.train", "--cfg", "job")
    assert result.returncode == 0, result.stderr
    assert "group_size: 8" in result.stdout and "task_name: arithmetic" in result.stdout


def test_unknown_reward_names_the_value():
    result = command("src.train", "reward=no_such_reward")
    assert result.returncode != 0
    assert "Could not find 'reward/no_such_reward'" in result.stderr


def test_a_run_that_fails_is_marked_failed(make_cfg, tmp_path):
    cfg = make_cfg(f"model.name_or_path={tmp_path / 'missing_model'}", "model.builder=null")
    with pytest.raises(InstantiationException, match="no model folder at .*missing_model"):
        train(cfg)
    run = only_run(cfg)
    assert run.info.status == "FAILED"
    assert run.data.params["model.name_or_path"].endswith("missing_model")  # the record survives


@pytest.mark.slow  # two steps on a 4-bit base on the CPU: 8-10 s, beside the 4-bit loading test
def test_four_bit_lora_spelling(make_cfg):
    cfg = make_cfg("hardware=[4bit,lora]", "algo.kl_beta=0.04")
    assert cfg.model.load_in_4bit and cfg.model.lora.r == 16
    train(cfg)
    run = only_run(cfg)
    assert metric_steps(cfg, run, "loss") == [1, 2]
    kl = history(cfg, run, "kl")
    assert kl[1] == 0.0 and kl[2] > 1e-5  # the 4-bit base under the disabled adapter


@pytest.mark.slow  # a real subprocess: 15-22 s
def test_command_line_overrides_and_data_path(tmp_path):
    path = tmp_path / "sums.json"
    path.write_text(
        json.dumps([{"question": f"What is {a} + 2?", "answer": str(a + 2)} for a in range(12)])
    )
    result = run_cli(
        f"data.path={path}",
        "data.val_size=4",
        "data.batch_size=2",
        "algo.kl_beta=0.1",
        "algo.group_size=4",
        "algo.max_completion_length=4",
        "trainer.max_steps=2",
        "model=tiny",
        "sft.enabled=false",
        f"paths.output_root={tmp_path}",
    )
    client, run = cli_run_record(result, tmp_path)
    params = run.data.params
    assert params["data.path"] == str(path) and params["data_report.val_rows"] == "4"
    assert (params["algo.kl_beta"], params["algo.group_size"]) == ("0.1", "4")
    # The method table names the one key the command line changed from algo/grpo.yaml.
    assert (params["method.algo"], params["method.chosen_by"]) == ("grpo", "default")
    assert params["method.changed"] == "kl_beta=0.1 (command line)"
    assert "kl_beta                      0.1   <- command line; algo/grpo.yaml: 0.0" in (
        result.stdout + result.stderr
    )
    assert [m.step for m in client.get_metric_history(run.info.run_id, "kl")] == [1, 2]
    assert sorted(m.step for m in client.get_metric_history(run.info.run_id, "eval/accuracy")) == [
        0,
        2,
    ]
    # Hydra's job log is in the run folder, not the project root.
    assert len(list(tmp_path.glob("runs/arithmetic/*/train.log"))) == 1
    assert not (PROJECT_ROOT / "train.log").exists()


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


def test_list_valued_lora_settings_reach_the_saved_adapter(make_cfg, tmp_path):
    """Config lists reach peft as plain lists: the adapter is saved at the end of the run
    (a ListConfig made `save_pretrained` fail after every step had trained)."""
    saved = tmp_path / "adapter"
    cfg = make_cfg(
        "hardware=[cpu,lora]",
        "model.lora.target_modules=[q_proj,v_proj]",
        "trainer.max_steps=1",
        f"save_model={saved}",
    )
    train(cfg)
    config = json.loads((saved / "adapter_config.json").read_text())
    assert sorted(config["target_modules"]) == ["q_proj", "v_proj"]
    assert only_run(cfg).info.status == "FINISHED"
