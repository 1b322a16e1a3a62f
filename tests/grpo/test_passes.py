"""Updates in passes of a token budget: the passes cover the rows once, keep to the budget, and
their gradients, loss and metrics are those of one pass over the whole batch."""

import dataclasses
import types

import pytest
import torch

import src.grpo.module as grpo_module
from src.grpo.objective import Objective, TokenLogProbs, grpo_loss
from src.grpo.passes import pass_cost, row_runs, token_passes
from src.rollout.rollout import Rollout
from tests.grpo.test_module import change, make_module

METRICS = (
    "pg_loss",
    "kl_penalty",
    "kl",
    "clip_ratio/low_mean",
    "clip_ratio/high_mean",
    "clip_ratio/region_mean",
    "entropy",
    "mean_log_prob",
)


def synthetic_rollout(prompt_lengths: list[int], completion_lengths: list[int]) -> Rollout:
    """Rows with left-padded prompts of the given lengths (rows with equal lengths in a row
    share a prompt) and completions of the given lengths."""
    rows, width, length = len(prompt_lengths), max(prompt_lengths), max(completion_lengths)
    prompt_mask = torch.zeros(rows, width, dtype=torch.long)
    for row, n in enumerate(prompt_lengths):
        prompt_mask[row, width - n :] = 1
    prompt_ids = prompt_mask * torch.tensor(prompt_lengths).unsqueeze(1)
    completion_mask = (torch.arange(length) < torch.tensor(completion_lengths).unsqueeze(1)).long()
    return Rollout(
        prompt_ids=prompt_ids,
        prompt_mask=prompt_mask,
        completion_ids=completion_mask * 7,
        completion_mask=completion_mask,
        is_clipped=torch.zeros(rows, dtype=torch.bool),
        completions=["x"] * rows,
    )


def covered(passes: list[torch.Tensor], rows: int) -> bool:
    return torch.equal(torch.cat(passes), torch.arange(rows))


def cost_of(rollout: Rollout, rows: torch.Tensor) -> int:
    prompt, completion = rollout.prompt_mask.sum(1), rollout.completion_mask.sum(1).clamp(min=1)
    return pass_cost(prompt[rows], completion[rows], row_runs(rollout)[rows])


def test_one_pass_without_a_budget_or_when_everything_fits():
    rollout = synthetic_rollout([10] * 4 + [6] * 4, [5, 8, 3, 8, 2, 2, 2, 2])
    # each prompt once (at the width of the longest, 10) plus 8 completions of 8 tokens
    assert cost_of(rollout, torch.arange(8)) == 2 * 10 + 8 * 8
    for budget in (None, 84, 10_000):
        passes = token_passes(rollout, budget)
        assert len(passes) == 1 and covered(passes, 8)


def test_passes_keep_to_the_budget_and_cut_between_groups():
    rollout = synthetic_rollout([10] * 4 + [6] * 4 + [9] * 4, [8] * 12)
    passes = token_passes(rollout, 50)  # a group costs 38-42: one group per pass
    assert [p.tolist() for p in passes] == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9, 10, 11]]
    passes = token_passes(rollout, 90)  # 124 in all: two passes, cut at a group's start
    assert covered(passes, 12) and len(passes) == 2
    assert passes[1][0].item() in (4, 8)
    assert all(cost_of(rollout, p) <= 90 for p in passes)


def test_a_group_over_the_budget_is_split_and_a_long_row_runs_alone():
    rollout = synthetic_rollout([10] * 8, [8, 8, 8, 8, 8, 8, 8, 40])
    passes = token_passes(rollout, 40)
    assert covered(passes, 8)
    assert all(cost_of(rollout, p) <= 40 for p in passes if p.numel() > 1)
    assert passes[-1].tolist() == [7]  # 10 + 40 tokens: over the budget on its own
    assert len(token_passes(rollout, 40, at_least=8)) == 8  # as many as there are rows
    assert len(token_passes(rollout, None, at_least=3)) == 3


def update(
    lm, rollout, advantages, old, ref, *, budget, loss_type, kl_beta, cap=None, mask_cut=False,
    top_entropy=1.0,
):  # fmt: skip
    """accumulate_gradients of a module without a trainer: plain backward, one process."""
    module = make_module(lm, True, loss_type)
    change(
        module,
        kl_beta=kl_beta,
        sampler_is_cap=cap,
        max_tokens_per_pass=budget,
        mask_truncated_completions=mask_cut,
        top_entropy_quantile=top_entropy,
    )
    module.trainer = types.SimpleNamespace(strategy=None)
    module.manual_backward = lambda loss: loss.backward()
    passes = []
    original = module.policy_loss
    module.policy_loss = lambda *args: passes.append(1) or original(*args)
    lm.zero_grad()
    loss, metrics, weights = module.accumulate_gradients(rollout, advantages, old, ref)
    grads = [p.grad.clone() for p in lm.parameters()]
    return len(passes), loss.item(), {k: v.item() for k, v in metrics.items()}, weights, grads


@pytest.mark.parametrize(
    ("loss_type", "kl_beta"), [("grpo", 0.0), ("bnpo", 0.0), ("dr_grpo", 0.1), ("dapo", 0.1)]
)
def test_passes_give_the_gradient_loss_and_metrics_of_one_pass(rollout_and_lm, loss_type, kl_beta):
    rollout, lm = rollout_and_lm
    # Group 2 ("Hi") has zero advantages: left out without a KL term.
    advantages = torch.tensor([1.0, -1.0, 0.0, 0.5, 0, 0, 0, 0, -0.3, 0.2, 0.4, -0.3])
    with torch.no_grad():
        logps = lm.log_probs(rollout)[0]
    old = logps + 0.3 * torch.randn(logps.shape)
    ref = logps + 0.2 * torch.randn(logps.shape)
    one = update(
        lm, rollout, advantages, old, ref, budget=None, loss_type=loss_type, kl_beta=kl_beta
    )
    many = update(
        lm, rollout, advantages, old, ref, budget=12, loss_type=loss_type, kl_beta=kl_beta
    )
    assert one[0] == 1 and many[0] >= 3
    assert many[1] == pytest.approx(one[1], rel=1e-5, abs=1e-7)
    for name in METRICS:
        assert many[2][name] == pytest.approx(one[2][name], rel=1e-5, abs=1e-7), name
    assert one[2]["clip_ratio/region_mean"] > 0  # the case exercises clipping
    assert (one[2]["kl"] > 0) == (kl_beta > 0)
    assert many[3] == one[3]  # the weights that reduce the metrics over processes
    for full, passed in zip(one[4], many[4], strict=True):
        assert torch.allclose(full, passed, atol=1e-6, rtol=1e-4)


def assert_both_are(one, many, lm, inputs, options) -> None:
    """The updates in one pass and in many have grpo_loss's value and gradient on `inputs`
    (rollout, old, ref, advantages, mask) with `options`."""
    rollout, old, ref, advantages, mask = inputs
    lm.zero_grad()
    expected, _ = grpo_loss(
        TokenLogProbs(lm.log_probs(rollout)[0], old, ref),
        advantages,
        mask,
        Objective(options["loss_type"], beta=options["beta"]),
        sampler_weights=options.get("sampler_weights"),
    )
    expected.backward()
    # The loss sums terms of both signs: a small total carries the terms' float32 rounding.
    assert one[1] == pytest.approx(expected.item(), rel=1e-5, abs=1e-7)
    assert many[1] == pytest.approx(expected.item(), rel=1e-5, abs=1e-7)
    for full, passed, wanted in zip(one[4], many[4], lm.parameters(), strict=True):
        assert torch.allclose(full, wanted.grad, atol=1e-6, rtol=1e-4)
        assert torch.allclose(passed, wanted.grad, atol=1e-6, rtol=1e-4)


@pytest.mark.parametrize(
    ("loss_type", "kl_beta"), [("token-mean", 0.0), ("seq-mean-token-mean", 0.1)]
)
def test_truncated_completions_leave_the_loss_in_every_pass(rollout_and_lm, loss_type, kl_beta):
    """algo.mask_truncated_completions: the loss (KL included) is grpo_loss over the rollout
    with the cut completions' tokens masked, whatever the passes; their tokens leave the
    token-mean's count."""
    rollout, lm = rollout_and_lm
    cut = torch.zeros(12, dtype=torch.bool)
    cut[[0, 3, 9]] = True
    rollout = dataclasses.replace(rollout, is_clipped=cut)
    advantages = torch.tensor([1.0, -1.0, 0.0, 0.5, 0, 0, 0, 0, -0.3, 0.2, 0.4, -0.3])
    with torch.no_grad():
        logps = lm.log_probs(rollout)[0]
    old = logps + 0.3 * torch.randn(logps.shape)
    ref = logps + 0.2 * torch.randn(logps.shape)
    args = (lm, rollout, advantages, old, ref)
    options = {"loss_type": loss_type, "kl_beta": kl_beta, "mask_cut": True}
    one = update(*args, budget=None, **options)
    many = update(*args, budget=12, **options)
    kept = rollout.completion_mask * (~cut).unsqueeze(1)
    loss = {"beta": kl_beta, "loss_type": loss_type}
    assert_both_are(one, many, lm, (rollout, old, ref, advantages, kept), loss)
    unmasked = update(*args, budget=None, loss_type=loss_type, kl_beta=kl_beta)
    assert unmasked[1] != pytest.approx(one[1], rel=1e-3)  # the cut rows counted before


@pytest.mark.parametrize("kl_beta", [0.0, 0.1])
def test_only_high_entropy_tokens_keep_their_policy_term_in_every_pass(rollout_and_lm, kl_beta):
    """algo.top_entropy_quantile 0.4: the policy term of tokens below the 0.6 quantile of the
    update's token entropies is dropped (grpo_loss with those tokens weighted 0), the KL term
    keeps every token, whatever the passes."""
    rollout, lm = rollout_and_lm
    advantages = torch.tensor([1.0, -1.0, 0.0, 0.5, 0, 0, 0, 0, -0.3, 0.2, 0.4, -0.3])
    with torch.no_grad():
        logps, entropy = lm.log_probs(rollout, with_entropy=True)
    old = logps + 0.3 * torch.randn(logps.shape)
    ref = logps + 0.2 * torch.randn(logps.shape)
    args = (lm, rollout, advantages, old, ref)
    options = {"loss_type": "token-mean", "kl_beta": kl_beta, "top_entropy": 0.4}
    one = update(*args, budget=None, **options)
    many = update(*args, budget=12, **options)
    counted = rollout.completion_mask.bool()
    threshold = torch.quantile(entropy[counted], 0.6)
    kept = ((entropy >= threshold) & counted).float()
    assert 0.3 < kept.sum() / counted.sum() < 0.5
    loss = {"beta": kl_beta, "loss_type": "token-mean"}
    inputs = (rollout, old, ref, advantages, rollout.completion_mask)
    assert_both_are(one, many, lm, inputs, {**loss, "sampler_weights": kept})
    everything = update(*args, budget=None, loss_type="token-mean", kl_beta=kl_beta)
    assert everything[1] != pytest.approx(one[1], rel=1e-3)


def test_passes_keep_the_sampler_correction_metrics(rollout_and_lm):
    rollout, lm = rollout_and_lm
    advantages = torch.tensor([1.0, 0.5, 0.2, 0.7] * 3)
    with torch.no_grad():
        logps = lm.log_probs(rollout)[0]
    reported = dataclasses.replace(rollout, sampler_logps=logps - 0.3 * torch.rand(logps.shape))
    args = (lm, reported, advantages, logps, None)
    one = update(*args, budget=None, loss_type="bnpo", kl_beta=0.0, cap=1.2)
    many = update(*args, budget=12, loss_type="bnpo", kl_beta=0.0, cap=1.2)
    assert many[0] > 1
    names = ("is_weight_mean", "is_capped_ratio", "logp_diff_mean", "logp_diff_max")
    for name in (f"sampler/{name}" for name in names):
        assert many[2][name] == pytest.approx(one[2][name], rel=1e-5, abs=1e-7), name
    assert 0 < one[2]["sampler/is_capped_ratio"] < 1
    gap = (logps - reported.sampler_logps) * rollout.action_mask
    assert one[2]["sampler/logp_diff_max"] == pytest.approx(float(gap.abs().max()), rel=1e-5)


def test_every_process_runs_as_many_passes(rollout_and_lm, monkeypatch):
    """On several processes the pass count is the largest any process needs; a process with
    fewer trained rows than that runs all its rows (the others add nothing)."""
    rollout, lm = rollout_and_lm
    module = make_module(lm, True, "grpo")
    change(module, max_tokens_per_pass=None)
    monkeypatch.setattr(grpo_module, "world_size", lambda: 2)
    monkeypatch.setattr(grpo_module, "sum_over_processes", lambda values: dict(values))
    counts = {"other": 5}
    monkeypatch.setattr(grpo_module, "gather_objects", lambda n: [n, counts["other"]])
    advantages = torch.tensor([1.0, -1.0, 0.0, 0.5, 0, 0, 0, 0, -0.3, 0.2, 0.4, -0.3])
    plan = module.update_plan(rollout, advantages)
    masks = module.pass_rows(rollout, plan)
    assert len(masks) == 5
    assert torch.equal(torch.stack(masks).sum(0), plan.trained.long())  # each trained row once
    counts["other"] = 9  # more than the 7 trained rows: all 12 rows run
    masks = module.pass_rows(rollout, plan)
    assert len(masks) == 9 and torch.equal(torch.stack(masks).sum(0), torch.ones(12).long())
