"""`dry_run=true` for every task in conf/task: model and data load, one rollout is made and
scored, a report is printed, and nothing is trained or saved; MLflow records a dry run."""

from __future__ import annotations

from pathlib import Path

import mlflow
import pytest

from src.train import train
from src.utils import per_machine
from src.utils.resolvers import PROJECT_ROOT
from tests.conftest import TINY
from tests.helpers.char_diffusion import SMALL as CHAR_DIFFUSION
from tests.helpers.small_gemma import build_small_gemma_folder

TASKS = sorted(path.stem for path in (PROJECT_ROOT / "conf" / "task").glob("*.yaml"))
MEDQA_SAMPLE = PROJECT_ROOT / "src" / "data" / "samples" / "medqa_sample.jsonl"
SHORT = ["algo.group_size=2", "algo.max_completion_length=6", "data.batch_size=2"]

# Per task: overrides that keep the run small, whether it uses the tiny model, and what its
# report must show beyond the common parts. A new task gets an entry here.
SETTINGS: dict[str, tuple[list[str], bool, list[str]]] = {
    "arithmetic": (SHORT, True, ["What is"]),
    "arithmetic_lm": ([*SHORT, "hardware=[cpu,lora]"], True, ["What is 23 + 41?"]),
    "medmcqa": (SHORT, True, ["<SOLUTION>", "similarity"]),
    "medqa": (SHORT, True, ["<SOLUTION>", "similarity"]),
    "math": (SHORT, True, ["Solve the following problem", "The answer is"]),
    "medqa_rewriter": (
        [*SHORT, "hardware=[cpu,lora]", "retrieval.k=1"],
        True,
        ["Textbook terms:", "queries:", "titles:"],
    ),
    "medqa_rewriter_smollm2": (
        [
            *SHORT,
            "hardware=[cpu,lora]",
            "policy.planner.max_completion_length=6",
            "policy.num_queries=2",
            "retrieval.k=1",
        ],
        True,
        ["plan:", "queries:", "titles:"],
    ),
    "reader": ([*SHORT, "hardware=[cpu,lora]", "retrieval.k=1"], True, ["passages"]),
    "medqa_searcher": (
        [*SHORT, "hardware=[cpu,lora]"],
        True,
        ["searches:", "gold_in_information:", "rewriter: freshly initialised, untrained"],
    ),
    "medqa_searcher_smollm2": (
        [*SHORT, "hardware=[cpu,lora]", "retrieval.k=1"],
        True,
        ["searches:", "gold_in_information:"],
    ),
    "char_diffusion": (
        CHAR_DIFFUSION,
        False,
        ["█", "char_accuracy", "judge: freshly initialised, untrained"],
    ),
}


def test_every_task_has_dry_run_settings():
    assert set(SETTINGS) == set(TASKS), "give the new task small dry-run settings here"


def dry_run(make_cfg, tmp_path, task, *model):
    """The dry run of `task` with its small settings (and `model` overrides in place of the
    tiny model's), its figures and its printed report."""
    overrides, tiny, shown = SETTINGS[task]
    if task == "medqa_rewriter_smollm2":  # planning every question takes a while: use 12
        subset = tmp_path / "medqa.jsonl"
        subset.write_text("\n".join(MEDQA_SAMPLE.read_text().splitlines()[:12]) + "\n")
        overrides = [*overrides, f"data.path={subset}"]
    if model:
        overrides = [*(o for o in TINY if not o.startswith("model=")), *model, *overrides]
        tiny = False
    cfg = make_cfg(
        f"task={task}", *overrides, "dry_run=true", f"save_model={tmp_path / 'model'}", tiny=tiny
    )
    return cfg, train(cfg)


@pytest.mark.parametrize("task", TASKS)
def test_a_dry_run_makes_one_rollout_and_trains_nothing(make_cfg, tmp_path, capsys, task):
    shown = SETTINGS[task][2]
    # a choice made in this process, e.g. oneDNN or MKL products: shown and recorded
    per_machine.measured_once(
        "planted_choice", lambda: per_machine.Verdict(False, False, {"a": 1e-3}, "planted")
    )
    cfg, figures = dry_run(make_cfg, tmp_path, task)

    report = capsys.readouterr().out
    assert "=== dry run: one rollout, no update ===" in report
    assert "prompt:" in report and "completion 2:" in report and "reward:" in report
    assert "shapes: prompt_ids" in report and "log_probs (" in report and "peak memory" in report
    for text in shown:
        assert text in report, text
    for name in cfg.reward.functions:  # every reward component is shown per completion
        assert f"'{name}':" in report, name
    assert "timing/sampling" in figures and "reward" in figures

    assert not (tmp_path / "model").exists()
    assert not (Path(cfg.paths.run_dir) / "checkpoints").exists()
    client = mlflow.MlflowClient(tracking_uri=cfg.paths.mlflow_uri)
    experiment = client.get_experiment_by_name(cfg.task_name)
    (run,) = client.search_runs([experiment.experiment_id])
    assert run.data.tags["dry_run"] == "true" and run.info.status == "FINISHED"
    assert "loss" not in run.data.metrics and "eval/reward" not in run.data.metrics
    lines = per_machine.choice_lines()
    assert any(
        line.startswith("planted_choice: False (measured now, not kept: planted") for line in lines
    )
    for line in lines:
        name, described = line.split(": ", 1)
        assert f"    {line}" in report.split("per-machine choices:")[1]
        assert run.data.params[f"machine_choice.{name}"] == described
    if task == "char_diffusion":  # its stages are not trained, and nothing is cached
        assert not Path(cfg.paths.cache_dir).exists()
        assert (Path(cfg.paths.run_dir) / "untrained" / "judge" / "char_model.json").is_file()
    if task == "medqa_searcher":  # no rewriter run: a fresh adapter is its start
        assert not Path(cfg.paths.cache_dir, "rewriter").exists()
        untrained = Path(cfg.paths.run_dir) / "untrained" / "rewriter"
        assert cfg.model.adapter_path == str(untrained)
        assert (untrained / "adapter_config.json").is_file()


@pytest.mark.parametrize("task", [task for task in TASKS if SETTINGS[task][1]])
def test_every_language_model_task_dry_runs_on_gemma_3(
    make_cfg, models_dir, tmp_path, capsys, task
):
    """`model=gemma3_270m` on every task, over a small random Gemma 3 folder (sliding
    windows, query and key norms, a tokenizer that adds its BOS): each prompt starts with
    one BOS, and the fused decoding step is proven on it."""
    from src.model.fast.probe import verdicts

    folder = build_small_gemma_folder(models_dir / "small_gemma3")
    cfg, figures = dry_run(
        make_cfg, tmp_path, task, "model=gemma3_270m", f"model.name_or_path={folder}"
    )
    report = capsys.readouterr().out
    assert cfg.model.offline_fallback.copy_of == "google/gemma-3-270m"
    assert "=== dry run: one rollout, no update ===" in report and "completion 2:" in report
    assert "shapes: prompt_ids" in report and "timing/sampling" in figures
    assert any(
        v.path.startswith("fused_steps") and v.proven and v.network.startswith("Gemma3")
        for v in verdicts()
    )


def test_the_base_model_rewriter_dry_runs_on_gemma_3(make_cfg, models_dir, tmp_path, capsys):
    """`task=medqa_rewriter` (also spelled with `experiment=rewriter_gemma_base`, as first
    measured): a plain few-shot prompt (no chat template, no planner), one BOS first, and each
    query ends at its line's end (`rollout.stop_strings`)."""
    folder = build_small_gemma_folder(models_dir / "small_gemma3")
    overrides, _, _ = SETTINGS["medqa_rewriter"]
    cfg = make_cfg(
        "task=medqa_rewriter",
        "experiment=rewriter_gemma_base",
        f"model.name_or_path={folder}",
        *overrides,
        "algo.max_completion_length=12",
        "dry_run=true",
        f"save_model={tmp_path / 'model'}",
        tiny=False,
    )
    assert cfg.rollout.stop_strings == ["\n"] and not cfg.policy.use_chat_template
    train(cfg)
    report = capsys.readouterr().out
    assert "Textbook terms:" in report
    assert report.split("plan:")[1].startswith("\n\n")  # the planner was not asked
    for block in report.split("completion ")[1:]:  # each completion is one line of text
        assert block.split("\n")[2].startswith("    queries:"), block
