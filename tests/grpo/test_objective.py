"""Hand-computed checks of the GRPO objective (docs/objective.md)."""

import math
from dataclasses import replace

import pytest
import torch

from src.grpo.advantages import group_advantages, keep_top_k
from src.grpo.objective import (
    DEFAULT_KNOBS,
    Denominators,
    Objective,
    TokenLogProbs,
    grpo_loss,
    per_token_kl,
    sampler_correction,
    sampler_mismatch,
)

REWARDS = torch.tensor([1.0, 0.0, 0.0, 0.0, 1.0, 1.0, 1.0, 1.0])


def loss(
    logps,
    advantages,
    mask,
    loss_type="grpo",
    old=None,
    ref=None,
    beta=0.0,
    eps=(0.2, 0.2),
    max_len=None,
):
    knobs = replace(DEFAULT_KNOBS, epsilon_low=eps[0], epsilon_high=eps[1])
    objective = Objective(loss_type, beta=beta, max_completion_length=max_len, knobs=knobs)
    return grpo_loss(TokenLogProbs(logps, old, ref), advantages, mask, objective)


def test_group_scale_divides_by_unbiased_group_std():
    # Group 1: mean 0.25, unbiased std sqrt((0.75^2 + 3 * 0.25^2) / 3) = 0.5.
    adv = group_advantages(REWARDS, group_size=4, scale="group", eps=0.0)
    assert adv[:4].tolist() == pytest.approx([1.5, -0.5, -0.5, -0.5])


def test_zero_std_group_gets_zero_advantage():
    adv = group_advantages(REWARDS, group_size=4)
    assert adv[4:].tolist() == [0.0, 0.0, 0.0, 0.0]
    assert torch.isfinite(adv).all()


def test_batch_scale_divides_by_std_of_all_rewards():
    # All 8: mean 0.625, squared deviations 5 * 0.375^2 + 3 * 0.625^2 = 1.875, / 7 -> std 0.517549.
    adv = group_advantages(REWARDS, group_size=4, scale="batch", eps=0.0)
    assert adv[0].item() == pytest.approx(0.75 / math.sqrt(1.875 / 7))
    assert adv[4:].tolist() == [0.0] * 4


def test_none_scale_only_centres():
    adv = group_advantages(REWARDS, group_size=4, scale="none")
    assert adv.tolist() == pytest.approx([0.75, -0.25, -0.25, -0.25, 0, 0, 0, 0])


def test_group_advantages_rejects_bad_input():
    with pytest.raises(ValueError, match="scale"):
        group_advantages(REWARDS, 4, scale="mean")
    with pytest.raises(ValueError, match="divisible"):
        group_advantages(REWARDS, 3)


def test_kl_is_zero_when_policies_agree_and_k3_otherwise():
    logps = torch.tensor([[-1.0, -2.0, -0.3]])
    assert per_token_kl(logps, logps).abs().max().item() == 0.0
    # ref/p = 0.5: 0.5 - ln 0.5 - 1 = 0.193147
    kl = per_token_kl(torch.zeros(1, 1), torch.log(torch.tensor([[0.5]])))
    assert kl.item() == pytest.approx(0.5 + math.log(2) - 1)


MASK = torch.tensor([[1.0, 1.0, 0.0], [1.0, 0.0, 0.0]])
ADV = torch.tensor([1.0, -1.0])


@pytest.mark.parametrize(
    ("loss_type", "expected"),
    [
        ("grpo", 0.0),  # mean of sequence means: (-1 + 1) / 2
        ("bnpo", -1 / 3),  # token sum / token count: (-1 - 1 + 1) / 3
        ("dapo", -1 / 3),
        ("dr_grpo", -1 / 8),  # token sum / (N * max_completion_length) = -1 / (2 * 4)
    ],
)
def test_each_aggregation(loss_type, expected):
    logps = torch.zeros(2, 3)
    value, _ = loss(logps, ADV, MASK, loss_type, max_len=4)
    assert value.item() == pytest.approx(expected)


def test_dr_grpo_needs_max_completion_length():
    with pytest.raises(ValueError, match="max_completion_length"):
        loss(torch.zeros(2, 3), ADV, MASK, "dr_grpo")


def test_unknown_loss_type_is_rejected():
    with pytest.raises(ValueError, match="loss_type"):
        loss(torch.zeros(2, 3), ADV, MASK, "ppo")


@pytest.mark.parametrize("loss_type", ["grpo", "bnpo", "dr_grpo", "dapo"])
def test_padding_never_counts(loss_type):
    logps = torch.zeros(2, 3)
    old = torch.zeros(2, 3)
    garbage_logps = logps.clone()
    garbage_logps[MASK == 0] = 7.0  # ratio e^7 on padded tokens, clipped or not
    ref = torch.full((2, 3), -3.0)
    clean, clean_m = loss(logps, ADV, MASK, loss_type, old=old, ref=ref, beta=0.1, max_len=3)
    dirty = garbage_logps.requires_grad_()
    noisy, noisy_m = loss(dirty, ADV, MASK, loss_type, old=old, ref=ref, beta=0.1, max_len=3)
    assert noisy.item() == pytest.approx(clean.item())
    assert {k: v.item() for k, v in noisy_m.items()} == pytest.approx(
        {k: v.item() for k, v in clean_m.items()}
    )
    noisy.backward()
    assert (dirty.grad[MASK == 0] == 0).all()
    assert (dirty.grad[MASK == 1] != 0).all()


def test_clip_ratios_count_the_right_tokens():
    old = torch.zeros(2, 4)
    ratios = torch.tensor([[1.5, 1.1, 0.5, 1.5], [0.5, 1.5, 0.9, 0.5]])
    mask = torch.tensor([[1.0, 1.0, 1.0, 0.0], [1.0, 1.0, 1.0, 0.0]])
    # Row 0 (A > 0): only 1.5 is clipped high (0.5 is not clipped: the min keeps the smaller term).
    # Row 1 (A < 0): only 0.5 is clipped low. The last column is padding and never counts.
    _, metrics = loss(torch.log(ratios), ADV, mask, "grpo", old=old)
    assert metrics["clip_ratio/high_mean"].item() == pytest.approx(1 / 6)
    assert metrics["clip_ratio/low_mean"].item() == pytest.approx(1 / 6)
    assert metrics["clip_ratio/region_mean"].item() == pytest.approx(2 / 6)


def test_asymmetric_clip_uses_epsilon_high():
    old = torch.zeros(1, 1)
    logps = torch.log(torch.tensor([[1.25]]))
    adv = torch.tensor([1.0])
    mask = torch.ones(1, 1)
    _, symmetric = loss(logps, adv, mask, old=old, eps=(0.2, 0.2))
    _, dapo = loss(logps, adv, mask, old=old, eps=(0.2, 0.28))
    assert symmetric["clip_ratio/high_mean"].item() == 1.0
    assert dapo["clip_ratio/high_mean"].item() == 0.0


def test_clipped_tokens_get_no_gradient():
    old = torch.zeros(1, 2)
    logps = torch.log(torch.tensor([[1.5, 1.1]])).requires_grad_()
    value, _ = loss(logps, torch.tensor([1.0]), torch.ones(1, 2), old=old)
    value.backward()
    assert logps.grad[0, 0].item() == 0.0
    # grpo: -(1/2) * ratio * A on the unclipped token: d/dlogp = -0.5 * 1.1
    assert logps.grad[0, 1].item() == pytest.approx(-0.55)


def test_kl_term_adds_beta_times_k3():
    logps = torch.zeros(1, 2)
    ref = torch.log(torch.full((1, 2), 0.5))
    value, metrics = loss(logps, torch.tensor([0.0]), torch.ones(1, 2), ref=ref, beta=0.1)
    k3 = 0.5 + math.log(2) - 1
    assert metrics["kl"].item() == pytest.approx(k3)
    assert value.item() == pytest.approx(0.1 * k3)
    without, no_kl = loss(logps, torch.tensor([0.0]), torch.ones(1, 2), ref=ref, beta=0.0)
    assert without.item() == 0.0 and no_kl["kl"].item() == 0.0


def test_plain_policy_gradient_when_old_is_none():
    # ratio == 1 with gradient d ratio / d logp = 1: grad = -A / (tokens in the sequence) / N.
    logps = torch.zeros(2, 3, requires_grad=True)
    value, _ = loss(logps, ADV, MASK, "grpo")
    value.backward()
    assert logps.grad.flatten().tolist() == pytest.approx([-0.25, -0.25, 0.0, 0.5, 0.0, 0.0])


# --------------------------------------------------------------------------- every term pinned
# One token, one completion: the surrogate's gradient with respect to the log-prob is
# -A * ratio where the unclipped term is the smaller one, and 0 where the clip decides.


def one_token_gradient(ratio: float, advantage: float, eps: tuple[float, float]) -> tuple:
    """Loss and d loss / d logp of one token at `ratio` (old log-prob 0) with advantage A."""
    logps = torch.tensor([[math.log(ratio)]], requires_grad=True)
    value, _ = loss(
        logps, torch.tensor([advantage]), torch.ones(1, 1), old=torch.zeros(1, 1), eps=eps
    )
    value.backward()
    return value.item(), logps.grad.item()


@pytest.mark.parametrize(
    ("ratio", "advantage", "eps", "expected_loss", "expected_grad"),
    [
        # A > 0 above 1 + epsilon_high: clipped, no gradient; DAPO's 0.28 lets 1.25 through.
        (1.25, 1.0, (0.2, 0.2), -1.2, 0.0),
        (1.25, 1.0, (0.2, 0.28), -1.25, -1.25),
        # A > 0 below 1 - epsilon_low: the min keeps ratio * A, so the gradient stays.
        (0.5, 1.0, (0.2, 0.2), -0.5, -0.5),
        # A < 0 below 1 - epsilon_low: clipped, no gradient.
        (0.5, -1.0, (0.2, 0.2), 0.8, 0.0),
        # A < 0 above 1 + epsilon_high: the min keeps ratio * A, so the gradient stays.
        (1.5, -1.0, (0.2, 0.2), 1.5, 1.5),
        # The low side uses epsilon_low, not epsilon_high: 0.85 is inside [0.8, ..] ...
        (0.85, -1.0, (0.2, 0.28), 0.85, 0.85),
        # ... and outside [0.9, ..], whatever epsilon_high is.
        (0.85, -1.0, (0.1, 0.28), 0.9, 0.0),
        (0.85, -1.0, (0.1, 0.05), 0.9, 0.0),
        # The high side uses epsilon_high, not epsilon_low.
        (1.1, 1.0, (0.3, 0.05), -1.05, 0.0),
        (1.1, 1.0, (0.05, 0.3), -1.1, -1.1),
    ],
)
def test_clipped_surrogate_value_and_gradient(ratio, advantage, eps, expected_loss, expected_grad):
    value, grad = one_token_gradient(ratio, advantage, eps)
    assert value == pytest.approx(expected_loss, rel=1e-6)
    assert grad == pytest.approx(expected_grad, rel=1e-6, abs=1e-9)


def test_kl_gradient_is_beta_times_one_minus_reference_over_policy():
    # d/dlogp [exp(ref - logp) - (ref - logp) - 1] = 1 - exp(ref - logp)
    logps = torch.tensor([[0.0, math.log(0.25)]], requires_grad=True)
    ref = torch.log(torch.tensor([[0.5, 0.5]]))
    value, _ = loss(logps, torch.tensor([0.0]), torch.ones(1, 2), ref=ref, beta=0.1)
    value.backward()
    assert logps.grad[0].tolist() == pytest.approx([0.1 * (1 - 0.5) / 2, 0.1 * (1 - 2.0) / 2])


def reference_loss(logps, old, ref, advantages, mask, beta, eps_low, eps_high, loss_type, max_len):
    """The objective of docs/objective.md written token by token, for comparison."""
    terms = [[None] * logps.size(1) for _ in range(logps.size(0))]
    for i in range(logps.size(0)):
        for t in range(logps.size(1)):
            ratio = torch.exp(logps[i, t] - old[i, t])
            clipped = torch.clamp(ratio, 1 - eps_low, 1 + eps_high)
            surrogate = -torch.minimum(ratio * advantages[i], clipped * advantages[i])
            delta = ref[i, t] - logps[i, t]
            terms[i][t] = surrogate + beta * (torch.exp(delta) - delta - 1)
    kept = [[terms[i][t] for t in range(logps.size(1)) if mask[i, t]] for i in range(len(terms))]
    if loss_type == "grpo":
        return sum(sum(row) / len(row) for row in kept) / len(kept)
    if loss_type in ("bnpo", "dapo"):
        return sum(sum(row) for row in kept) / sum(len(row) for row in kept)
    return sum(sum(row) for row in kept) / (len(kept) * max_len)


@pytest.mark.parametrize("loss_type", ["grpo", "bnpo", "dapo", "dr_grpo"])
def test_each_loss_type_matches_the_objective_token_by_token(loss_type):
    old = -torch.arange(1, 21, dtype=torch.float).view(4, 5) / 7
    ratios = torch.tensor(
        [
            [1.5, 1.1, 0.6, 1.25, 0.9],  # A > 0: 1.5 clipped high (1 + 0.28), 0.6 kept by the min
            [0.5, 1.4, 3.0, 3.0, 3.0],  # A < 0: 0.5 clipped low (1 - 0.2), 1.4 kept by the min
            [1.0, 0.7, 1.3, 3.0, 3.0],
            [0.85, 3.0, 3.0, 3.0, 3.0],  # padding (3.0) never counts
        ]
    )
    logps = (old + torch.log(ratios)).requires_grad_()
    ref = old + torch.tensor([0.3, -0.2, 0.1, 0.4, -0.5]).expand(4, 5)
    advantages = torch.tensor([1.3, -0.7, 0.4, -1.0])
    mask = torch.tensor(
        [[1, 1, 1, 1, 1], [1, 1, 0, 0, 0], [1, 1, 1, 0, 0], [1, 0, 0, 0, 0]], dtype=torch.float
    )
    settings = {"beta": 0.05, "eps": (0.2, 0.28)}
    value, metrics = loss(
        logps, advantages, mask, loss_type, old=old, ref=ref, max_len=6, **settings
    )
    (grad,) = torch.autograd.grad(value, logps)
    leaf = logps.detach().requires_grad_()
    expected = reference_loss(leaf, old, ref, advantages, mask, 0.05, 0.2, 0.28, loss_type, 6)
    (expected_grad,) = torch.autograd.grad(expected, leaf)
    assert value.item() == pytest.approx(expected.item(), rel=1e-5)
    assert torch.allclose(grad, expected_grad, atol=1e-6, rtol=1e-5)
    # The case exercises both clips and the KL term, so none of them goes unchecked.
    ratio = torch.exp(logps.detach() - old)
    assert ((ratio > 1.28) & (advantages[:, None] > 0) & (mask > 0)).any()
    assert ((ratio < 0.8) & (advantages[:, None] < 0) & (mask > 0)).any()
    assert metrics["kl"].item() > 0.01
    # The aggregations differ on this case, so a wrong one cannot pass for another.
    others = {
        other: loss(logps, advantages, mask, other, old=old, ref=ref, max_len=6, **settings)[0]
        for other in ("grpo", "bnpo", "dr_grpo")
        if other != loss_type and {other, loss_type} != {"bnpo", "dapo"}
    }
    for other, other_value in others.items():
        assert other_value.item() != pytest.approx(value.item(), rel=1e-3), other


# --------------------------------------------------------------------------- keep_top_k (top_k_ratio)


def test_keep_top_k_keeps_the_best_half_of_a_group():
    rewards = torch.tensor([0.1, 0.9, 0.5, 0.9])
    advantages = torch.tensor([-1.0, 2.0, 0.5, 3.0])
    # ceil(0.5 * 4) = 2: the two 0.9s, completions 1 and 3.
    assert keep_top_k(advantages, rewards, 4, 0.5).tolist() == [0.0, 2.0, 0.0, 3.0]


def test_keep_top_k_works_group_by_group():
    rewards = torch.tensor([0.1, 0.9, 0.5, 0.2, 5.0, -1.0, 0.0, 4.0])
    advantages = torch.arange(1.0, 9.0)
    # ceil(0.25 * 4) = 1 per group: completion 1 of group 0, completion 0 of group 1.
    kept = keep_top_k(advantages, rewards, 4, 0.25)
    assert kept.tolist() == [0.0, 2.0, 0.0, 0.0, 5.0, 0.0, 0.0, 0.0]
    # ceil(0.75 * 4) = 3 per group: each group's lowest reward loses its advantage.
    kept = keep_top_k(advantages, rewards, 4, 0.75)
    assert kept.tolist() == [0.0, 2.0, 3.0, 4.0, 5.0, 0.0, 7.0, 8.0]


def test_keep_top_k_ratio_one_returns_the_advantages_unchanged():
    advantages = torch.tensor([0.3, -0.3, 1.0, -1.0])
    kept = keep_top_k(advantages, torch.tensor([2.0, 1.0, 4.0, 3.0]), 2, 1.0)
    assert kept is advantages


def test_keep_top_k_ties_go_to_the_earlier_completion():
    advantages = torch.tensor([1.0, 2.0, 3.0, 4.0, 5.0, 6.0])
    rewards = torch.tensor([1.0, 1.0, 1.0, 0.0, 2.0, 2.0])
    # G = 3, ceil(0.5 * 3) = 2: group 0 is all tied (completions 0 and 1 win); in group 1 the
    # two 2.0s win.
    assert keep_top_k(advantages, rewards, 3, 0.5).tolist() == [1.0, 2.0, 0.0, 0.0, 5.0, 6.0]
    # ceil(1/3 * 3) = 1: of the tied 2.0s, the earlier (completion 1 of group 1) wins.
    assert keep_top_k(advantages, rewards, 3, 1 / 3).tolist() == [1.0, 0.0, 0.0, 0.0, 5.0, 0.0]


def test_keep_top_k_tiny_ratio_keeps_one_and_decimal_ratios_are_exact():
    rewards = torch.tensor([0.1, 0.9, 0.5, 0.2])
    kept = keep_top_k(torch.ones(4), rewards, 4, 0.01)
    assert kept.tolist() == [0.0, 1.0, 0.0, 0.0]
    # 0.3 * 10 is 3.0000000000000004 in floats; the ratio as written keeps 3, not 4.
    kept = keep_top_k(torch.ones(10), torch.arange(10.0), 10, 0.3)
    assert kept.tolist() == [0.0] * 7 + [1.0] * 3


@pytest.mark.parametrize("ratio", [0.0, -0.5, 1.5, math.nan])
def test_keep_top_k_rejects_a_ratio_outside_zero_one(ratio):
    with pytest.raises(ValueError, match=r"ratio must be in \(0, 1\]"):
        keep_top_k(torch.ones(4), torch.ones(4), 4, ratio)


def test_keep_top_k_rejects_bad_shapes():
    with pytest.raises(ValueError, match="divisible"):
        keep_top_k(torch.ones(6), torch.ones(6), 4, 0.5)
    with pytest.raises(ValueError, match="divisible"):
        keep_top_k(torch.ones(4), torch.ones(8), 4, 0.5)


# --------------------------------------------------------------------------- algo=reinforce


@pytest.mark.parametrize("loss_type", ["grpo", "bnpo", "dr_grpo", "dapo"])
def test_infinite_epsilons_never_clip_and_stay_finite(loss_type):
    # algo=reinforce sets both epsilons to inf: clamp(ratio, -inf, inf) is the ratio itself.
    old = torch.zeros(2, 3)
    ratios = torch.tensor([[5.0, 0.01, 1.0], [0.01, 5.0, 1.0]])
    logps = torch.log(ratios).requires_grad_()
    inf = (math.inf, math.inf)
    value, metrics = loss(logps, ADV, MASK, loss_type, old=old, eps=inf, max_len=3)
    # The same as clipping at +-1e30, i.e. the unclipped surrogate -ratio * A ...
    expected = reference_loss(logps.detach(), old, old, ADV, MASK, 0.0, 1e30, 1e30, loss_type, 3)
    assert math.isfinite(value.item())
    assert value.item() == pytest.approx(float(expected))
    if loss_type == "grpo":
        # ... by hand: row 0 (A = 1) -(5 + 0.01) / 2, row 1 (A = -1) 0.01; mean of the rows.
        assert value.item() == pytest.approx((-(5 + 0.01) / 2 + 0.01) / 2)
    assert {k: v.item() for k, v in metrics.items()} == {
        "kl": 0.0,
        "clip_ratio/low_mean": 0.0,
        "clip_ratio/high_mean": 0.0,
        "clip_ratio/region_mean": 0.0,
        "pg_loss": pytest.approx(value.item()),
        "kl_penalty": 0.0,
    }
    value.backward()
    assert torch.isfinite(logps.grad).all()
    # Every unpadded token keeps the policy gradient -A * ratio (scaled by the aggregation).
    assert (logps.grad[MASK == 1] != 0).all()
    # With one update per rollout (old None) it is the plain policy gradient, as with clipping.
    plain = torch.zeros(2, 3, requires_grad=True)
    value, metrics = loss(plain, ADV, MASK, loss_type, eps=inf, max_len=3)
    clipped = torch.zeros(2, 3, requires_grad=True)
    reference, _ = loss(clipped, ADV, MASK, loss_type, max_len=3)
    value.backward()
    reference.backward()
    assert value.item() == pytest.approx(reference.item())
    assert torch.allclose(plain.grad, clipped.grad)
    assert metrics["clip_ratio/region_mean"].item() == 0.0


@pytest.mark.parametrize("loss_type", ["grpo", "bnpo", "dr_grpo", "dapo"])
def test_the_loss_is_its_policy_gradient_part_plus_its_kl_penalty(loss_type):
    torch.manual_seed(0)
    logps = torch.randn(4, 5) - 2
    ref = logps + 0.3 * torch.randn(4, 5)
    mask = torch.tensor([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1], [1, 0, 0, 0, 0], [1, 1, 0, 0, 0]])
    advantages = torch.tensor([1.0, -0.5, 0.2, -0.7])
    value, metrics = loss(logps, advantages, mask, loss_type, ref=ref, beta=0.1, max_len=5)
    assert metrics["kl_penalty"] > 0
    assert (metrics["pg_loss"] + metrics["kl_penalty"]).item() == pytest.approx(value.item())
    _, no_kl = loss(logps, advantages, mask, loss_type, max_len=5)
    assert no_kl["kl_penalty"] == 0 and no_kl["pg_loss"].item() == pytest.approx(
        metrics["pg_loss"].item()
    )


@pytest.mark.parametrize("loss_type", ["bnpo", "dapo"])
def test_token_losses_divide_by_the_given_token_count(loss_type):
    # Two processes whose gradients are averaged: each divides its token sum by the global
    # count / 2, so the mean of their losses is the global token mean.
    logps = torch.zeros(2, 3)
    whole, _ = loss(logps, ADV, MASK, loss_type)
    halves = [
        grpo_loss(
            TokenLogProbs(logps[i : i + 1]), ADV[i : i + 1], MASK[i : i + 1],
            Objective(loss_type), Denominators(tokens=MASK.sum() / 2),
        )[0]
        for i in range(2)
    ]  # fmt: skip
    assert (sum(halves) / 2).item() == pytest.approx(whole.item())
    local = [
        loss(logps[i : i + 1], ADV[i : i + 1], MASK[i : i + 1], loss_type)[0] for i in range(2)
    ]
    assert (sum(local) / 2).item() != pytest.approx(whole.item())  # each its own count differs


def test_sampler_correction_caps_the_trainer_to_sampler_ratio():
    old = torch.log(torch.tensor([[0.5, 0.2, 0.9], [0.3, 0.3, 0.3]]))
    sampled = torch.log(torch.tensor([[0.5, 0.05, 0.6], [0.6, 0.3, 0.1]]))
    mask = torch.tensor([[1, 1, 1], [1, 1, 0]])
    weights, metrics = sampler_correction(old, sampled, mask, cap=2.0)
    expected = torch.tensor([[1.0, 2.0, 1.5], [0.5, 1.0, 0.0]])  # 0.2 / 0.05 = 4 is capped at 2
    assert torch.allclose(weights, expected)
    assert metrics["sampler/is_capped_ratio"].item() == pytest.approx(1 / 5)
    assert metrics["sampler/is_weight_mean"].item() == pytest.approx(6 / 5)


def test_sampler_mismatch_by_hand():
    """|l_trainer - l_sampler| per token over the mask, and per sequence the absolute sum of
    the row's differences (the log of its probability ratio), means and largest."""
    trainer = torch.tensor([[-1.0, -2.0, -0.5], [-0.2, -0.3, -9.0]])
    sampler = torch.tensor([[-1.5, -1.0, -0.5], [-0.1, -0.6, -1.0]])
    mask = torch.tensor([[1, 1, 1], [1, 1, 0]])  # the last token of row 2 is padding
    found = sampler_mismatch(trainer, sampler, mask)
    # per token: 0.5, 1.0, 0.0 | 0.1, 0.3; per sequence: |0.5 - 1.0 + 0| = 0.5, |-0.1 + 0.3| = 0.2
    assert found["sampler/logp_diff_mean"].item() == pytest.approx(1.9 / 5)
    assert found["sampler/logp_diff_max"].item() == pytest.approx(1.0)
    assert found["sampler/seq_logp_diff_mean"].item() == pytest.approx(0.35)
    assert found["sampler/seq_logp_diff_max"].item() == pytest.approx(0.5)
    empty = sampler_mismatch(trainer, sampler, torch.zeros_like(mask))
    assert all(value.item() == 0.0 for value in empty.values())


def test_sampler_weights_scale_each_tokens_surrogate():
    logps = torch.zeros(2, 3)
    plain, _ = loss(logps, ADV, MASK, "bnpo")
    doubled, _ = grpo_loss(
        TokenLogProbs(logps), ADV, MASK, Objective("bnpo"), sampler_weights=torch.full((2, 3), 2.0)
    )
    assert doubled.item() == pytest.approx(2 * plain.item())


def test_sequence_level_ratio_is_the_geometric_mean_of_a_completions_token_ratios():
    """GSPO: completion 0's log-ratios 0.2 and -0.4 give it exp(-0.1) on both tokens; completion
    1's average to 0, ratio 1. loss = mean(-A * ratio) = (-exp(-0.1) + 1) / 2; each token of
    completion 0 gets d/dl = 1/2 (completions) * -1 (A) * exp(-0.1) * 1/2 (its share of the
    mean), completion 1's real tokens 1/2 * 1 * 1 * 1/3, padding 0."""
    logps = torch.tensor([[-1.0, -2.0, 0.0], [-0.5, -0.5, -0.5]], requires_grad=True)
    old = torch.tensor([[-1.2, -1.6, 0.0], [-0.5, -0.7, -0.3]])
    mask = torch.tensor([[1.0, 1.0, 0.0], [1.0, 1.0, 1.0]])
    value, metrics = grpo_loss(
        TokenLogProbs(logps, old), torch.tensor([1.0, -1.0]), mask,
        Objective("grpo", ratio_level="sequence"),
    )  # fmt: skip
    ratio = math.exp(-0.1)
    assert value.item() == pytest.approx((1 - ratio) / 2)
    (grad,) = torch.autograd.grad(value, logps)
    expected = [[-ratio / 4, -ratio / 4, 0.0], [1 / 6, 1 / 6, 1 / 6]]
    assert torch.allclose(grad, torch.tensor(expected), atol=1e-6)
    assert metrics["clip_ratio/region_mean"].item() == 0.0


def test_sequence_level_ratio_on_policy_is_the_token_level_loss():
    logps = torch.tensor([[-1.0, -2.0, 0.0], [-0.5, -0.5, -0.5]], requires_grad=True)
    mask = torch.tensor([[1.0, 1.0, 0.0], [1.0, 1.0, 1.0]])
    grads = []
    for level in ("token", "sequence"):
        value, _ = grpo_loss(
            TokenLogProbs(logps), torch.tensor([1.0, -1.0]), mask,
            Objective("dapo", ratio_level=level),
        )  # fmt: skip
        grads.append(torch.autograd.grad(value, logps)[0])
    assert torch.allclose(grads[0], grads[1])
    with pytest.raises(ValueError, match="ratio_level"):
        grpo_loss(
            TokenLogProbs(logps), torch.tensor([1.0, -1.0]), mask,
            Objective("grpo", ratio_level="group"),
        )  # fmt: skip


@pytest.mark.parametrize("loss_type", ["seq-mean-token-mean", "token-mean", "dr_grpo"])
def test_parts_divided_by_the_whole_counts_add_up_to_the_whole(loss_type):
    """Denominators counted over the whole batch up front: the losses and token-mean metrics of
    disjoint parts add up to the whole batch's (no rescaling afterwards)."""
    logps = torch.tensor([[-1.0, -2.0, 0.0], [-0.5, -0.5, -0.5], [-0.2, 0.0, 0.0]])
    old = logps + torch.tensor([[0.3, -0.4, 0.0], [0.1, 0.5, -0.3], [-0.6, 0.0, 0.0]])
    ref = logps + 0.1
    mask = torch.tensor([[1.0, 1.0, 0.0], [1.0, 1.0, 1.0], [1.0, 0.0, 0.0]])
    adv = torch.tensor([1.0, -0.5, 0.7])
    objective = Objective(loss_type, beta=0.1, max_completion_length=3)
    whole, whole_metrics = grpo_loss(TokenLogProbs(logps, old, ref), adv, mask, objective)
    counts = Denominators(tokens=mask.sum(), sequences=3, metric_tokens=mask.sum())
    parts = [
        grpo_loss(
            TokenLogProbs(logps[rows], old[rows], ref[rows]),
            adv[rows],
            mask[rows],
            objective,
            counts,
        )
        for rows in (slice(0, 1), slice(1, 3))
    ]
    assert sum(part[0] for part in parts).item() == pytest.approx(whole.item())
    for name, value in whole_metrics.items():
        assert sum(part[1][name] for part in parts).item() == pytest.approx(value.item()), name
    assert whole_metrics["clip_ratio/region_mean"] > 0 and whole_metrics["kl"] > 0
