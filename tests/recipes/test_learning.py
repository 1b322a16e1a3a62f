"""The claim of the embedded default: GRPO measurably improves a warm-started tiny model."""

import mlflow
import pytest

from src.train import train


@pytest.mark.slow
def test_grpo_raises_held_out_accuracy(make_cfg, warm_tiny):
    cfg = make_cfg(
        *warm_tiny,  # the embedded default's own warm start, shared by the session
        "~reward.functions.printable",  # the recipe's reward alone
        "trainer.max_steps=150",
        "trainer.val_check_interval=150",
        "data.batch_size=16",
        "algo.group_size=8",
        "algo.max_completion_length=8",
        "data.val_size=256",
        "data.eval_batch_size=128",
        "algo.samples_every_n_steps=0",
    )
    train(cfg)
    client = mlflow.MlflowClient(tracking_uri=cfg.paths.mlflow_uri)
    (run,) = client.search_runs([client.get_experiment_by_name("arithmetic").experiment_id])
    history = {m.step: m.value for m in client.get_metric_history(run.info.run_id, "eval/accuracy")}
    assert sorted(history) == [0, 150]
    assert 0.2 <= history[0] <= 0.6  # the warm start stopped where GRPO has signal
    assert history[150] >= history[0] + 0.10, history
