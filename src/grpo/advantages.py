"""Advantage estimators: per-completion advantages from the rewards of a batch of groups, each
a small pure function registered by name (`algo.advantage_estimator`); docs/objective.md
states every formula.

Shapes: N = B * G completions, rows i*G ... i*G+G-1 the completions of prompt i; `rewards` and
`lengths` (counted completion tokens) are [N], the whole global batch's (every process's rows,
gathered), so a batch-wide statistic is the global batch's.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from fractions import Fraction

import torch
from torch import Tensor

from src.utils.registry import Registry

SCALES = ("group", "batch", "none")
# How several reward functions make one advantage (TRL's multi_objective_aggregation):
# the weighted sum's advantage, or each function's group-normalised score summed (GDPO).
REWARD_AGGREGATIONS = ("sum_then_normalize", "normalize_then_sum")

# (rewards [N], group_size, lengths [N], scale) -> advantages [N]
Estimator = Callable[[Tensor, int, Tensor, str], Tensor]
# registered by name, the value of `algo.advantage_estimator`
ESTIMATORS: Registry[Estimator] = Registry("advantage estimator")


def estimate_advantages(
    name: str, rewards: Tensor, group_size: int, lengths: Tensor, scale: str = "group"
) -> Tensor:
    """The advantages [N] of estimator `name` (one of `ESTIMATORS`)."""
    estimator = ESTIMATORS.named(name)
    _check_groups(rewards, group_size)
    return estimator(rewards, group_size, lengths, scale)


@ESTIMATORS.register("grpo")
def _grpo(rewards: Tensor, group_size: int, lengths: Tensor, scale: str) -> Tensor:
    return group_advantages(rewards, group_size, scale)


@ESTIMATORS.register("rloo")
def rloo_advantages(rewards: Tensor, group_size: int, lengths: Tensor, scale: str) -> Tensor:
    """REINFORCE leave-one-out: each reward minus the mean of the other G - 1 rewards of its
    group, r_n - (sum_g r - r_n) / (G - 1) = G / (G - 1) * (r_n - mean_g r). Not scaled."""
    groups = rewards.view(-1, group_size)
    others = (groups.sum(dim=1, keepdim=True) - groups) / (group_size - 1)
    return (groups - others).view(-1)


@ESTIMATORS.register("reinforce_pp")
def reinforce_pp_advantages(
    rewards: Tensor, group_size: int, lengths: Tensor, scale: str, eps: float = 1e-8
) -> Tensor:
    """REINFORCE++ with a group baseline: each reward minus its group's mean, then whitened
    over the global batch's tokens: every completion's centred reward counts once per token
    it has, c_n = r_n - mean_g r, mu = sum_n L_n c_n / sum_n L_n,
    var = sum_n L_n (c_n - mu)^2 / (sum_n L_n - 1), A_n = (c_n - mu) / sqrt(var + eps)."""
    groups = rewards.view(-1, group_size)
    centred = (groups - groups.mean(dim=1, keepdim=True)).view(-1)
    weights = lengths.to(centred.dtype)
    count = weights.sum()
    if count <= 1:  # no tokens to whiten over: the centred rewards
        return centred
    mean = (weights * centred).sum() / count
    var = (weights * (centred - mean) ** 2).sum() / (count - 1)
    return (centred - mean) * torch.rsqrt(var + eps)


def group_advantages(
    rewards: Tensor, group_size: int, scale: str = "group", eps: float = 1e-4
) -> Tensor:
    """Group-relative advantages: each reward minus its group's mean, optionally scaled.

    `group` divides by the group's unbiased std (GRPO), `batch` by the std of all N rewards,
    `none` keeps the centred reward (Dr. GRPO). A group whose rewards are all equal gets zero.
    """
    if scale not in SCALES:
        raise ValueError(f"scale must be one of {SCALES}, got {scale!r}")
    _check_groups(rewards, group_size)
    groups = rewards.view(-1, group_size)
    centred = (groups - groups.mean(dim=1, keepdim=True)).view(-1)
    if scale == "group":
        std = groups.std(dim=1, keepdim=True).expand_as(groups).reshape(-1)
        return centred / (std + eps)
    if scale == "batch":
        return centred / (rewards.std() + eps)
    return centred


def normalize_then_sum(
    parts: dict[str, Tensor], weights: dict[str, float], group_size: int, eps: float = 1e-4
) -> Tensor:
    """GDPO's advantages from several reward functions' scores [N] each: every function's
    scores normalised within each group, z_k = (r_k - mean_g r_k) / (std_g r_k + eps), then
    summed with the reward weights, s = sum_k w_k z_k, then normalised over the batch,
    A = (s - mean s) / (std s + eps); stds unbiased. A function that ties within a group adds 0
    to it, so one reward with a spread is not drowned by another's scale."""
    if not parts:
        raise ValueError("normalize_then_sum needs at least one reward function's scores")
    total = None
    for name, scores in parts.items():
        _check_groups(scores, group_size)
        groups = scores.float().view(-1, group_size)
        mean, std = groups.mean(dim=1, keepdim=True), groups.std(dim=1, keepdim=True)
        centred = groups - mean  # exactly 0 in a tied group, which stays 0 whatever eps
        normalised = torch.where(std > 0, centred / (std + eps), centred).view(-1)
        normalised = normalised * float(weights[name])
        total = normalised if total is None else total + normalised
    if total.numel() < 2:
        return total - total.mean()
    return (total - total.mean()) / (total.std() + eps)


def keep_top_k(advantages: Tensor, rewards: Tensor, group_size: int, ratio: float) -> Tensor:
    """Advantages of each group's top `ceil(ratio * G)` completions by reward; 0 for the rest.

    Completions of prompt i are rows i*G .. i*G+G-1 (G = `group_size`) of `advantages` and
    `rewards`, both 1-D of the same length N, a multiple of G. In every group the
    k = ceil(ratio * G) completions with the highest rewards keep their advantage and the
    other G - k get exactly 0 (so they add nothing to the loss without a KL term). Equal
    rewards rank by position, the earlier completion first, so the choice is deterministic.
    k is computed on ratio's decimal form (0.3 * 10 keeps 3, not the 4 of float rounding)
    and is at least 1 for any ratio > 0 (0.01 with G = 4 keeps 1). The advantages are taken
    as given (e.g. `group_advantages` of the whole group, so every reward still sets the
    baseline); only which completions keep theirs changes. `ratio` 1.0 (k = G) returns
    `advantages` itself, unchanged. Raises ValueError unless 0 < ratio <= 1 and the shapes are as above.
    """
    if not 0 < ratio <= 1:
        raise ValueError(f"ratio must be in (0, 1], got {ratio!r}")
    if rewards.dim() != 1 or rewards.numel() % group_size != 0 or advantages.shape != rewards.shape:
        raise ValueError(
            f"advantages and rewards must be 1-D of one length divisible by "
            f"group_size={group_size}, got shapes {tuple(advantages.shape)} and "
            f"{tuple(rewards.shape)}"
        )
    k = math.ceil(Fraction(str(float(ratio))) * group_size)
    if k >= group_size:
        return advantages
    groups = rewards.detach().reshape(-1, group_size)
    # A stable descending sort keeps equal rewards in their original order: earlier first.
    order = torch.sort(groups, dim=1, descending=True, stable=True).indices
    keep = torch.zeros_like(groups, dtype=torch.bool).scatter_(1, order[:, :k], True)
    return torch.where(keep.view(-1), advantages, torch.zeros_like(advantages))


def _check_groups(rewards: Tensor, group_size: int) -> None:
    if rewards.dim() != 1 or rewards.numel() % group_size != 0:
        raise ValueError(
            f"rewards must be 1-D with a length divisible by group_size={group_size}, "
            f"got shape {tuple(rewards.shape)}"
        )
