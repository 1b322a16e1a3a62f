"""Hand-computed checks of the advantage estimators (docs/objective.md), and that a run uses the
one `algo.advantage_estimator` names."""

import math

import pytest
import torch

from src.grpo import advantages as estimators
from src.grpo.advantages import (
    ESTIMATORS,
    estimate_advantages,
    group_advantages,
    normalize_then_sum,
    reinforce_pp_advantages,
    rloo_advantages,
)
from src.train import train
from tests.helpers.mlflow_runs import only_run

REWARDS = torch.tensor([1.0, 0.0, 0.0, 0.0, 1.0, 1.0, 1.0, 1.0])
LENGTHS = torch.tensor([1, 3, 3, 3, 2, 2, 2, 2])


def test_the_registered_estimators():
    assert sorted(ESTIMATORS) == ["grpo", "reinforce_pp", "rloo"]


def test_grpo_is_the_group_advantage_scaled_as_asked():
    adv = estimate_advantages("grpo", REWARDS, 4, LENGTHS, "none")
    assert adv.tolist() == pytest.approx([0.75, -0.25, -0.25, -0.25, 0, 0, 0, 0])


def test_rloo_subtracts_the_mean_of_the_other_rewards():
    # 1 - mean(0, 0, 0) = 1; 0 - mean(1, 0, 0) = -1/3; a tied group gets 0.
    adv = rloo_advantages(REWARDS, 4, LENGTHS, "none")
    assert adv.tolist() == pytest.approx([1, -1 / 3, -1 / 3, -1 / 3, 0, 0, 0, 0])
    # the same as G / (G - 1) times the group-centred reward
    centred = estimate_advantages("grpo", REWARDS, 4, LENGTHS, "none")
    assert torch.allclose(adv, centred * 4 / 3)


def test_reinforce_pp_whitens_the_centred_rewards_over_tokens():
    # centred c = [0.75, -0.25 x 3, 0 x 4]; token weights L = [1, 3, 3, 3, 2, 2, 2, 2], 18 tokens.
    # mean = (0.75 - 0.25 * 9) / 18 = -1/12; sum L (c - mean)^2 = (5/6)^2 + 9 (1/6)^2 + 8 (1/12)^2
    # = 25/36 + 9/36 + 2/36 = 1, so var = 1/17 and A = (c + 1/12) * sqrt(17).
    adv = reinforce_pp_advantages(REWARDS, 4, LENGTHS, "none", eps=0.0)
    root = math.sqrt(17)
    expected = [5 / 6 * root] + [-1 / 6 * root] * 3 + [1 / 12 * root] * 4
    assert adv.tolist() == pytest.approx(expected)
    # over tokens the whitened advantages have mean 0 and unbiased variance 1
    weights = LENGTHS.float()
    mean = (weights * adv).sum() / weights.sum()
    assert float(mean) == pytest.approx(0.0, abs=1e-6)
    assert float((weights * adv**2).sum() / (weights.sum() - 1)) == pytest.approx(1.0)


def test_estimators_refuse_bad_input():
    with pytest.raises(ValueError, match="must be one of"):
        estimate_advantages("gae", REWARDS, 4, LENGTHS)
    with pytest.raises(ValueError, match="divisible"):
        estimate_advantages("rloo", REWARDS, 3, LENGTHS)
    with pytest.raises(ValueError, match="registered twice"):
        ESTIMATORS.register("rloo")(rloo_advantages)


@pytest.mark.parametrize("choice", ["rloo", "reinforce_pp"])
def test_a_run_uses_the_estimator_its_algo_names(make_cfg, monkeypatch, choice):
    used = []
    own = ESTIMATORS[choice]

    def spy(rewards, group_size, lengths, scale):
        used.append((rewards.numel(), group_size, lengths.tolist()))
        return own(rewards, group_size, lengths, scale)

    monkeypatch.setitem(estimators.ESTIMATORS, choice, spy)
    cfg = make_cfg(f"algo={choice}", "trainer.max_steps=1")
    train(cfg)
    run = only_run(cfg)
    assert run.data.params["algo.advantage_estimator"] == choice
    assert len(used) == 1 and used[0][:2] == (8, 4)  # 2 prompts x 4 completions
    assert all(length >= 1 for length in used[0][2])


def test_normalize_then_sum_normalises_each_reward_in_its_group_then_the_sum_over_the_batch():
    """GDPO, G = 2: reward a spreads in group 1 only, b (weight 0.5) in group 2 only. Each
    normalised in its group: a -> [1/sqrt2, -1/sqrt2, 0, 0], b -> [0, 0, 1/sqrt2, -1/sqrt2];
    weighted sum s = [0.7071, -0.7071, 0.3536, -0.3536], mean 0, unbiased std
    sqrt(1.25 / 3); so group 2 gets half of group 1's advantage, where the plain weighted sum
    (totals 1, 0, 2, 1) would give both groups the same."""
    parts = {"a": torch.tensor([1.0, 0.0, 1.0, 1.0]), "b": torch.tensor([0.0, 0.0, 2.0, 0.0])}
    advantages = normalize_then_sum(parts, {"a": 1.0, "b": 0.5}, group_size=2, eps=0.0)
    s = torch.tensor([1.0, -1.0, 0.5, -0.5]) / math.sqrt(2)
    assert advantages.tolist() == pytest.approx((s / math.sqrt(1.25 / 3)).tolist())
    summed = group_advantages(parts["a"] + 0.5 * parts["b"], group_size=2, eps=0.0)
    assert summed[:2].tolist() == pytest.approx(summed[2:].tolist())
    with pytest.raises(ValueError, match="at least one"):
        normalize_then_sum({}, {}, group_size=2)


def test_a_run_with_two_rewards_sums_their_group_normalised_scores(make_cfg, monkeypatch):
    import src.grpo.module as grpo_module

    seen = []

    def spy(parts, weights, group_size):
        seen.append((sorted(parts), dict(weights), group_size))
        return normalize_then_sum(parts, weights, group_size)

    monkeypatch.setattr(grpo_module, "normalize_then_sum", spy)
    cfg = make_cfg(
        "reward=[accuracy,overlong]",
        "algo.multi_objective_aggregation=normalize_then_sum",
        "trainer.max_steps=1",
    )
    train(cfg)
    ((names, weights, group_size),) = seen  # one step
    assert {"accuracy", "overlong"} <= set(names) and group_size == 4
    assert weights["accuracy"] == weights["overlong"] == 1.0
    metrics = only_run(cfg).data.metrics
    assert "rewards/overlong/mean" in metrics
