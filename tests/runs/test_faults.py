"""Faults during training: rewards that raise or return NaN, non-finite losses and gradients."""

from __future__ import annotations

import mlflow
import pytest
import torch

from src.grpo.module import GRPOModule
from src.grpo.nonfinite import NonFiniteTrainingError
from src.reward.accuracy import AnswerAccuracy
from src.reward.combine import RewardError
from src.train import train
from tests.helpers.mlflow_runs import history


def the_run(cfg) -> tuple[mlflow.MlflowClient, mlflow.entities.Run]:
    client = mlflow.MlflowClient(tracking_uri=cfg.paths.mlflow_uri)
    (run,) = client.search_runs([client.get_experiment_by_name(cfg.task_name).experiment_id])
    return client, run


@pytest.fixture
def accuracy_fails_on_odd_calls(monkeypatch):
    """AnswerAccuracy raises on every other batch, and on any single outcome during those."""
    original = AnswerAccuracy.__call__
    calls = {"n": 0}

    def flaky(self, outcomes, rows):
        if len(outcomes) > 1:
            calls["n"] += 1
        if calls["n"] % 2:
            raise ConnectionError("grader unreachable")
        return original(self, outcomes, rows)

    monkeypatch.setattr(AnswerAccuracy, "__call__", flaky)


def test_a_raising_reward_stops_the_run_and_the_run_says_why(make_cfg, accuracy_fails_on_odd_calls):
    cfg = make_cfg()
    with pytest.raises(RewardError, match="'accuracy' raised ConnectionError: grader unreachable"):
        train(cfg)
    _, run = the_run(cfg)
    assert run.info.status == "FAILED"
    assert run.data.tags["error"].startswith("RewardError: reward function 'accuracy' raised")


def test_on_error_zero_scores_and_counts_reward_errors(make_cfg, accuracy_fails_on_odd_calls):
    cfg = make_cfg("reward.on_error=zero", "trainer.max_steps=3")
    train(cfg)
    client, run = the_run(cfg)
    assert run.info.status == "FINISHED"
    errors = history(cfg, run, "rewards/accuracy/errors")
    assert sorted(errors) == [1, 2, 3]
    # The step-0 evaluation used call 1; training calls 2, 3, 4 fail on 3 only: 8 outcomes.
    assert list(errors.values()) == [0.0, 8.0, 0.0]
    assert history(cfg, run, "rewards/accuracy/mean")[2] == 0.0


def test_a_non_finite_loss_or_gradient_skips_the_update(make_cfg, monkeypatch):
    original_loss = GRPOModule.policy_loss
    original_norm = GRPOModule.clipped_gradient_norm
    seen = {"loss": 0, "norm": 0}
    snapshots = []

    def loss_nan_on_second_call(self, *args, **kwargs):
        seen["loss"] += 1
        loss, metrics, weights = original_loss(self, *args, **kwargs)
        trained = [p for p in self.lm.parameters() if p.requires_grad]
        snapshots.append([p.detach().clone() for p in trained])
        # A term with a gradient, so that an update that is not skipped moves the weights.
        loss = loss + 1e-3 * sum(p.float().pow(2).sum() for p in trained)
        return (loss * float("nan") if seen["loss"] == 2 else loss), metrics, weights

    def norm_inf_on_third_call(self, optimizer):
        seen["norm"] += 1
        norm = original_norm(self, optimizer)
        return torch.tensor(float("inf")) if seen["norm"] == 2 else norm  # the 3rd update

    monkeypatch.setattr(GRPOModule, "policy_loss", loss_nan_on_second_call)
    monkeypatch.setattr(GRPOModule, "clipped_gradient_norm", norm_inf_on_third_call)
    cfg = make_cfg("trainer.max_steps=2")
    with pytest.warns(RuntimeWarning, match="non-finite loss"):
        train(cfg)
    client, run = the_run(cfg)
    assert run.info.status == "FINISHED"
    # Two skipped updates, then the second real one: four rollouts for two steps.
    assert seen["loss"] == 4
    assert history(cfg, run, "skipped_steps") == {1: 0.0, 2: 2.0}
    assert sorted(history(cfg, run, "loss")) == [1, 2]
    grad_norms = history(cfg, run, "grad_norm")
    assert sorted(grad_norms) == [1, 2] and all(0 < v < float("inf") for v in grad_norms.values())
    # The first update moved the weights; the two skipped ones left them alone.
    assert not all(torch.equal(a, b) for a, b in zip(snapshots[0], snapshots[1], strict=True))
    for before, after in zip(snapshots[1], snapshots[3], strict=True):
        assert torch.equal(before, after)


def test_non_finite_updates_in_a_row_stop_the_run_keeping_the_checkpoint(make_cfg, monkeypatch):
    original_loss = GRPOModule.policy_loss
    calls = {"n": 0}

    def nan_after_first(self, *args, **kwargs):
        calls["n"] += 1
        loss, metrics, weights = original_loss(self, *args, **kwargs)
        return (loss if calls["n"] == 1 else loss * float("nan")), metrics, weights

    monkeypatch.setattr(GRPOModule, "policy_loss", nan_after_first)
    cfg = make_cfg(
        "trainer.max_steps=5",
        "algo.max_nonfinite_steps=2",
        "callbacks.checkpoint.every_n_train_steps=1",
    )
    with (
        pytest.warns(RuntimeWarning, match="update skipped"),
        pytest.raises(NonFiniteTrainingError, match="2 updates in a row .* at step 2"),
    ):
        train(cfg)
    _, run = the_run(cfg)
    assert run.info.status == "FAILED"
    assert run.data.tags["error"].startswith("NonFiniteTrainingError: 2 updates in a row")
    checkpoint = torch.load(
        f"{cfg.paths.run_dir}/checkpoints/last.ckpt", map_location="cpu", weights_only=False
    )
    assert checkpoint["global_step"] == 1
