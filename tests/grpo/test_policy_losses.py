"""Hand-computed values and gradients of the policy losses (docs/objective.md#policy-losses)
and the aggregation names."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest
import torch

from src.grpo.objective import (
    AGGREGATIONS,
    DEFAULT_KNOBS,
    TRL_LOSS_TYPES,
    Objective,
    TokenLogProbs,
    aggregation,
    grpo_loss,
)
from src.grpo.policy_losses import POLICY_LOSSES, LossSettings, policy_loss

MASK = torch.ones(2, 2)


def run(logps, old, advantages, mask=MASK, loss_type="token-mean", policy="clip", **knobs):
    objective = Objective(
        loss_type, max_completion_length=4, policy=policy, knobs=replace(DEFAULT_KNOBS, **knobs)
    )
    return grpo_loss(TokenLogProbs(logps, old), advantages, mask, objective)


def test_the_registry_holds_the_three_losses_and_refuses_others() -> None:
    assert set(POLICY_LOSSES) == {"clip", "cispo", "sapo"}
    with pytest.raises(ValueError, match="policy loss must be one of"):
        policy_loss(
            "ppo",
            torch.ones(1, 1),
            torch.ones(1, 1),
            torch.zeros(1, 1),
            LossSettings(0.2, 0.2, None, 1.0, 1.05),
        )


def test_cispo_caps_the_detached_weight_and_keeps_every_tokens_gradient() -> None:
    """Ratios exp(2) = 7.39 (capped at 5), exp(0.1), 1 and exp(-0.5); A = 2 for completion 0 and
    -1 for completion 1; token-mean over 4 tokens. Term -w A l, gradient -w A / 4: the capped
    token keeps its gradient (the clip would have zeroed it)."""
    logps = torch.tensor([[-1.0, -2.0], [-0.5, -1.5]], requires_grad=True)
    old = torch.tensor([[-3.0, -2.1], [-0.5, -1.0]])
    advantages = torch.tensor([2.0, -1.0])
    value, metrics = run(logps, old, advantages, policy="cispo", epsilon_high=5.0)
    w = [5.0, math.exp(0.1), 1.0, math.exp(-0.5)]
    terms = [-w[0] * 2 * -1.0, -w[1] * 2 * -2.0, -w[2] * -1 * -0.5, -w[3] * -1 * -1.5]
    assert value.item() == pytest.approx(sum(terms) / 4)
    (grad,) = torch.autograd.grad(value, logps)
    expected = [[-w[0] * 2 / 4, -w[1] * 2 / 4], [w[2] / 4, w[3] / 4]]
    assert torch.allclose(grad, torch.tensor(expected), atol=1e-6)
    assert metrics["clip_ratio/high_mean"].item() == pytest.approx(1 / 4)
    assert metrics["clip_ratio/low_mean"].item() == 0.0


def test_sapo_gates_smoothly_with_one_temperature_per_sign() -> None:
    """Completion 0: ratio exp(0.5), A = 1, tau 1: term -4 sigmoid(exp(0.5) - 1), gradient
    -4 s (1 - s) rho A / 2 (seq-mean-token-mean over 1 real token of 2 completions).
    Completion 1: ratio 1, A = -1, tau 1.05: term (4 / 1.05) sigmoid(0), gradient
    -4 * 1/4 * 1 * -1 / 2 = 1/2, the plain policy gradient's."""
    logps = torch.tensor([[-1.0, 0.0], [-2.0, 0.0]], requires_grad=True)
    old = torch.tensor([[-1.5, 0.0], [-2.0, 0.0]])
    mask = torch.tensor([[1.0, 0.0], [1.0, 0.0]])
    value, metrics = run(
        logps, old, torch.tensor([1.0, -1.0]), mask, "seq-mean-token-mean",
        policy="sapo", sapo_temperature_pos=1.0, sapo_temperature_neg=1.05,
    )  # fmt: skip
    rho = math.exp(0.5)
    s = 1 / (1 + math.exp(-(rho - 1)))
    assert value.item() == pytest.approx((-4 * s + 4 / 1.05 * 0.5) / 2)
    (grad,) = torch.autograd.grad(value, logps)
    expected = [[-4 * s * (1 - s) * rho / 2, 0.0], [0.5, 0.0]]
    assert torch.allclose(grad, torch.tensor(expected), atol=1e-6)
    assert metrics["clip_ratio/region_mean"].item() == 0.0


@pytest.mark.parametrize("policy", ["clip", "cispo", "sapo"])
def test_on_policy_every_loss_gives_the_plain_policy_gradient(policy) -> None:
    logps = torch.tensor([[-1.0, -2.0], [-0.5, -1.5]], requires_grad=True)
    advantages = torch.tensor([2.0, -1.0])
    value, _ = run(logps, None, advantages, policy=policy, epsilon_high=5.0)
    (grad,) = torch.autograd.grad(value, logps)
    expected = -advantages.unsqueeze(1).expand(2, 2) / 4
    assert torch.allclose(grad, expected)


def test_delta_caps_the_ratio_of_a_negative_advantage() -> None:
    """A = -1, ratio e = 2.718: the clip keeps -min(-e, -1.2) = e with gradient -A rho = e;
    with delta 2 the term is 2 and its gradient 0; the token counts as clipped high."""
    logps = torch.tensor([[0.0]], requires_grad=True)
    old = torch.tensor([[-1.0]])
    one = torch.ones(1, 1)
    plain, plain_metrics = run(logps, old, torch.tensor([-1.0]), one)
    capped, capped_metrics = run(logps, old, torch.tensor([-1.0]), one, delta=2.0)
    assert plain.item() == pytest.approx(math.e)
    assert capped.item() == pytest.approx(2.0)
    assert torch.autograd.grad(plain, logps)[0].item() == pytest.approx(math.e)
    assert torch.autograd.grad(capped, logps)[0].item() == 0.0
    assert plain_metrics["clip_ratio/high_mean"].item() == 0.0
    assert capped_metrics["clip_ratio/high_mean"].item() == 1.0


def test_delta_leaves_positive_advantages_to_the_clip() -> None:
    logps = torch.tensor([[0.0]], requires_grad=True)
    old = torch.tensor([[-1.0]])
    one = torch.ones(1, 1)
    plain, _ = run(logps, old, torch.tensor([1.0]), one)
    capped, _ = run(logps, old, torch.tensor([1.0]), one, delta=2.0)
    assert plain.item() == capped.item() == pytest.approx(-1.2)


def test_verls_aggregation_names_equal_trls_loss_types() -> None:
    logps = torch.tensor([[-1.0, -2.0, 0.0], [-0.5, -0.5, -0.5]], requires_grad=True)
    mask = torch.tensor([[1.0, 1.0, 0.0], [1.0, 1.0, 1.0]])
    advantages = torch.tensor([1.0, -0.5])
    assert set(TRL_LOSS_TYPES.values()) == set(AGGREGATIONS)
    for trl_name, verl_name in TRL_LOSS_TYPES.items():
        assert aggregation(trl_name) == aggregation(verl_name) == verl_name
        ours = [run(logps, None, advantages, mask, name)[0] for name in (trl_name, verl_name)]
        assert ours[0].item() == ours[1].item()
    values = {name: run(logps, None, advantages, mask, name)[0].item() for name in AGGREGATIONS}
    assert len(set(values.values())) == 3  # three different aggregations
    with pytest.raises(ValueError, match="loss_type must be one of"):
        aggregation("token-sum")
