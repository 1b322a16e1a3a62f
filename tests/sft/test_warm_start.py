"""The supervised warm start: it teaches, stops at its target, and is trained only once."""

import json
from pathlib import Path

import mlflow
import pytest
from lightning.pytorch.strategies import DDPStrategy

import src.sft.warm_start as warm_start_module
from src.train import train

SFT = [
    "~reward.functions.printable",  # the recipe's reward alone decides when the warm start stops
    "sft.enabled=true",
    "sft.max_steps=6",
    "sft.batch_size=8",
    "sft.check_size=8",
    "sft.check_every_n_steps=3",
    "trainer.max_steps=1",
]


def cached_folders(cfg) -> list[Path]:
    return sorted(Path(cfg.sft.cache_dir).glob("arithmetic-*"))


def test_warm_start_runs_once_then_is_reused(make_cfg, monkeypatch):
    cfg = make_cfg(*SFT)
    train(cfg)
    (folder,) = cached_folders(cfg)
    summary = json.loads((folder / "warm_start.json").read_text())
    assert summary["steps"] == 6
    client = mlflow.MlflowClient(tracking_uri=cfg.paths.mlflow_uri)
    run = client.search_runs([client.get_experiment_by_name("arithmetic").experiment_id])[0]
    assert [m.step for m in client.get_metric_history(run.info.run_id, "sft/eval_reward")] == [2, 5]
    assert run.data.params["model.name_or_path"].endswith("tiny_llama_h128_l4")
    assert run.data.tags["warm_start"] == str(folder)

    def no_training(*args, **kwargs):
        raise AssertionError("the cached warm start was trained again")

    monkeypatch.setattr(warm_start_module, "SFTModule", no_training)
    train(make_cfg(*SFT))
    assert cached_folders(cfg) == [folder]
    with pytest.raises(AssertionError, match="trained again"):
        train(make_cfg(*SFT, "sft.optimizer.lr=0.01"))  # other settings, other cache entry


def test_warm_start_stops_at_its_target_reward(make_cfg):
    cfg = make_cfg(*SFT, "sft.stop_at_reward=0.0")
    train(cfg)
    (folder,) = cached_folders(cfg)
    assert json.loads((folder / "warm_start.json").read_text())["steps"] == 3


def test_the_warm_start_runs_where_and_how_grpo_runs(make_cfg):
    cfg = make_cfg("trainer.devices=2", "trainer.strategy=ddp", "data.batch_size=4")
    assert warm_start_module.placement(cfg.trainer) == {
        "accelerator": "cpu",
        "devices": 2,
        "num_nodes": 1,
        "strategy": "ddp",
        "precision": "32-true",
        "use_distributed_sampler": False,  # each process takes its share of a global batch
    }
    multi = warm_start_module.placement(make_cfg("hardware=[multi_gpu,lora]").trainer)
    assert isinstance(multi["strategy"], DDPStrategy)  # built afresh, not shared with GRPO's
    assert (multi["accelerator"], multi["devices"], multi["precision"]) == ("gpu", -1, "bf16-true")


def test_compiling_keeps_the_warm_start_and_weight_settings_change_it(make_cfg):
    plain = warm_start_module.cache_key(make_cfg())
    assert warm_start_module.cache_key(make_cfg("model.compile=true")) == plain
    # one warm start for a sweep over algorithms, dynamic sampling's reserve of prompts included
    assert warm_start_module.cache_key(make_cfg("algo=dapo")) == plain
    assert warm_start_module.cache_key(make_cfg("model.dtype=bfloat16")) != plain
