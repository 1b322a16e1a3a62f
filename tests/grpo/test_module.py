"""The GRPO module's update: leaving zero-advantage completions out changes nothing but cost."""

import dataclasses
import functools
import math

import pytest
import torch

from src.grpo.module import GRPOModule
from src.grpo.settings import AlgoSettings
from src.policy.generator import Generator
from src.reward.accuracy import AnswerAccuracy
from src.reward.combine import CombinedReward
from src.rollout.hf import HFSampler

CLIP_METRICS = ("clip_ratio/low_mean", "clip_ratio/high_mean", "clip_ratio/region_mean")


def make_module(lm, skip: bool, loss_type: str) -> GRPOModule:
    return GRPOModule(
        lm=lm,
        sampler=HFSampler(max_completion_length=6),
        policy=Generator(),
        reward=CombinedReward({"accuracy": AnswerAccuracy()}),
        optimizer=functools.partial(torch.optim.SGD, lr=0.1),
        settings=AlgoSettings(group_size=4, loss_type=loss_type, skip_zero_advantage=skip),
    )


def change(module: GRPOModule, **settings) -> None:
    """Change some of a module's settings."""
    module.settings = dataclasses.replace(module.settings, **settings)


@pytest.mark.parametrize("loss_type", ["grpo", "bnpo", "dapo", "dr_grpo"])
def test_skipping_zero_advantages_keeps_loss_gradient_and_clip_ratios(rollout_and_lm, loss_type):
    rollout, lm = rollout_and_lm
    # Group 2 ("Hi") has zero std; one completion of group 1 sits exactly at its group's mean.
    advantages = torch.tensor([1.0, -1.0, 0.0, 0.5, 0, 0, 0, 0, -0.3, 0.2, 0.4, -0.3])
    with torch.no_grad():
        old = lm.log_probs(rollout)[0] + 0.3 * torch.randn(rollout.completion_ids.shape)
    results = {}
    for skip in (False, True):
        module = make_module(lm, skip, loss_type)
        lm.zero_grad()
        loss, metrics, _ = module.policy_loss(rollout, advantages, old, None)
        loss.backward()
        grads = [p.grad.clone() for p in lm.parameters()]
        results[skip] = (loss.item(), {k: metrics[k].item() for k in CLIP_METRICS}, grads)
    (full_loss, full_clip, full_grads), (skip_loss, skip_clip, skip_grads) = (
        results[False],
        results[True],
    )
    assert skip_loss == pytest.approx(full_loss, rel=1e-5, abs=1e-7)
    assert skip_clip == pytest.approx(full_clip)
    assert full_clip["clip_ratio/region_mean"] > 0  # the case exercises clipping
    for full, skipped in zip(full_grads, skip_grads, strict=True):
        assert torch.allclose(full, skipped, atol=1e-6, rtol=1e-4)


def test_nothing_is_skipped_with_a_kl_term_or_nothing_to_learn(rollout_and_lm, monkeypatch):
    rollout, lm = rollout_and_lm
    seen = []
    original = lm.log_probs

    def spy(part, *args, **kwargs):
        seen.append(part.completion_ids.size(0))
        return original(part, *args, **kwargs)

    monkeypatch.setattr(lm, "log_probs", spy)
    module = make_module(lm, True, "grpo")
    module.policy_loss(rollout, torch.zeros(12), None, None)
    module.policy_loss(rollout, torch.tensor([1.0, -1.0] + [0.0] * 10), None, None)
    change(module, kl_beta=0.1)
    module.policy_loss(
        rollout,
        torch.tensor([1.0, -1.0] + [0.0] * 10),
        None,
        torch.zeros(12, rollout.completion_ids.size(1)),
    )
    assert seen == [12, 2, 12]


def test_select_drops_padding_only_other_rows_needed(rollout_and_lm):
    rollout, _ = rollout_and_lm
    rows = torch.zeros(12, dtype=torch.bool)
    rows[4:8] = True  # the short prompt "Hi"
    part = rollout.select(rows)
    assert part.prompt_mask.all()  # its left padding is gone
    assert part.completion_mask[:, -1].any()  # no all-padding completion column is left
    assert part.completions == rollout.completions[4:8]
    assert torch.equal(
        part.completion_ids, rollout.completion_ids[4:8, : part.completion_ids.size(1)]
    )


def test_a_sampler_that_reports_its_log_probs_is_corrected_only_when_asked(rollout_and_lm):
    rollout, lm = rollout_and_lm
    advantages = torch.tensor([1.0, 0.5, 0.2, 0.7] * 3)  # all one sign: the loss is not ~0
    with torch.no_grad():
        trainer_logps = lm.log_probs(rollout)[0]
    results = {}
    for name, cap, shift in (("plain", None, 0.0), ("same", 2.0, 0.0), ("lower", 2.0, -0.1)):
        module = make_module(lm, False, "bnpo")
        change(module, sampler_is_cap=cap)
        # the sampler saw each token as likely as the trainer, or e^-0.1 times as likely
        reported = dataclasses.replace(rollout, sampler_logps=trainer_logps + shift)
        results[name] = module.policy_loss(reported, advantages, trainer_logps, None)[:2]
    assert "sampler/is_weight_mean" not in results["plain"][1]
    assert results["same"][0].item() == pytest.approx(results["plain"][0].item(), abs=1e-6)
    assert results["same"][1]["sampler/is_weight_mean"].item() == pytest.approx(1.0)
    assert results["lower"][1]["sampler/is_weight_mean"].item() == pytest.approx(math.exp(0.1))
    assert results["lower"][0].item() == pytest.approx(
        math.exp(0.1) * results["plain"][0].item(), rel=1e-5
    )
