"""End to end: `task=math` with `preset=from_sft` on the tiny model: our SFT warm start on the
reference solutions, then GRPO with the four heuristic components logged, in one MLflow run."""

from __future__ import annotations

import json
from pathlib import Path

import mlflow
import pytest

from src.train import train
from tests.helpers.mlflow_runs import history, runs

COMPONENTS = ("length", "formulas", "concepts", "structure")
SMALL = [
    "task=math",
    "preset=from_sft",
    "model=tiny",
    "hardware=[cpu,lora]",
    "data.val_size=4",
    "data.eval_batch_size=4",
    "algo.group_size=2",
    "algo.max_completion_length=8",
    "algo.samples_every_n_steps=1",
    "sft.max_steps=2",
    "sft.batch_size=2",
    "sft.check_size=2",
    "sft.check_every_n_steps=2",
    "trainer.max_steps=2",
    "trainer.val_check_interval=2",
    "room.k=2",
    "room.eval_rows=4",
]


@pytest.mark.slow  # a warm start and two GRPO steps (about 10 s), kept out of the fast loop
def test_from_sft_warm_starts_then_trains_with_every_heuristic_component(make_cfg, tmp_path):
    cfg = make_cfg(*SMALL, tiny=False)
    train(cfg)
    (run,) = runs(cfg)
    tags, params = run.data.tags, run.data.params
    assert tags["warm_start"].startswith(cfg.sft.cache_dir)  # GRPO went on from this adapter
    assert params["algo.optimizer.lr"] == "5e-06" and params["epochs"] == "3"
    assert params["trainer.max_steps"] == "2"  # the command line wins over the preset's epochs
    assert history(cfg, run, "sft/eval_reward")  # the warm start checked its held-back rows
    for name in COMPONENTS:
        assert sorted(history(cfg, run, f"rewards/{name}/mean")) == [1, 2], name
        assert sorted(history(cfg, run, f"eval/{name}")) == [0, 2], name
    client = mlflow.MlflowClient(tracking_uri=cfg.paths.mlflow_uri)
    table_file = client.download_artifacts(run.info.run_id, "samples/step_000001.json")
    table = json.loads(Path(table_file).read_text())
    assert set(COMPONENTS) <= set(table["columns"])
    assert (tmp_path / "run" / "model" / "adapter_config.json").is_file()
