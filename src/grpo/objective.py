"""The GRPO objective as pure tensor functions; docs/objective.md states every formula.

Nothing here knows about models or configs, so every term can be checked by hand in tests.
Shapes: N = B * G completions, T = completion length; completions of prompt i sit at rows
i*G ... i*G+G-1.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from src.grpo.policy_losses import LossSettings, policy_loss

# The aggregations, named for what they do (verl's loss_agg_mode), and TRL's loss_type names
# for them: `algo.loss_type` takes either.
AGGREGATIONS = ("seq-mean-token-mean", "token-mean", "seq-mean-token-sum-norm")
TRL_LOSS_TYPES = {
    "grpo": "seq-mean-token-mean",
    "bnpo": "token-mean",
    "dapo": "token-mean",
    "dr_grpo": "seq-mean-token-sum-norm",
}
LOSS_TYPES = (*TRL_LOSS_TYPES, *AGGREGATIONS)
RATIO_LEVELS = ("token", "sequence")


def aggregation(loss_type: str) -> str:
    """The aggregation `loss_type` names (one of AGGREGATIONS; TRL's names are aliases)."""
    if loss_type not in LOSS_TYPES:
        raise ValueError(f"loss_type must be one of {LOSS_TYPES}, got {loss_type!r}")
    return TRL_LOSS_TYPES.get(loss_type, loss_type)


def per_token_kl(logps: Tensor, ref_logps: Tensor) -> Tensor:
    """k3 estimator of KL(policy || reference) per token; zero where both agree, never negative."""
    delta = ref_logps - logps
    return torch.exp(delta) - delta - 1


def _masked_mean(values: Tensor, mask: Tensor) -> Tensor:
    return (values * mask).sum() / mask.sum().clamp(min=1.0)


def grpo_loss(
    logps: Tensor,
    old_logps: Tensor | None,
    ref_logps: Tensor | None,
    advantages: Tensor,
    mask: Tensor,
    *,
    beta: float,
    epsilon_low: float,
    epsilon_high: float,
    loss_type: str,
    max_completion_length: int | None = None,
    num_tokens: Tensor | float | None = None,
    sampler_weights: Tensor | None = None,
    ratio_level: str = "token",
    policy: str = "clip",
    delta: float | None = None,
    sapo_temperatures: tuple[float, float] = (1.0, 1.05),
) -> tuple[Tensor, dict[str, Tensor]]:
    """Policy loss `policy` (the clipped surrogate by default) plus beta * KL, aggregated as
    `loss_type` says.

    logps, old_logps, ref_logps and mask are [N, T]; advantages is [N]. old_logps None means
    one update per rollout (ratio 1, gradient of the plain policy gradient); ref_logps None or
    beta == 0 drops the KL term. `num_tokens` is what `bnpo`/`dapo` divide the token sum by
    (None: the mask's count); `sampler_weights` [N, T] multiply each token's surrogate (the
    truncated importance weight of a sampler that differs from the trained network, see
    `sampler_correction`). `ratio_level` `sequence` (GSPO) gives every token of a completion
    the completion's ratio, the geometric mean of its token ratios. `policy`, `delta` and
    `sapo_temperatures` (positive, negative advantages) choose and tune the per-token policy
    loss (`src.grpo.policy_losses`). Returns the scalar loss and detached metrics.
    """
    aggregation(loss_type)  # refuses an unknown name before any work
    mask = mask.to(logps.dtype)
    if old_logps is None:
        old_logps = logps.detach()
    adv = advantages.unsqueeze(1)

    if ratio_level not in RATIO_LEVELS:
        raise ValueError(f"ratio_level must be one of {RATIO_LEVELS}, got {ratio_level!r}")
    log_ratio = logps - old_logps
    if ratio_level == "sequence":  # GSPO: exp of the completion's mean token log-ratio
        counts = mask.sum(dim=1, keepdim=True).clamp(min=1.0)
        log_ratio = ((log_ratio * mask).sum(dim=1, keepdim=True) / counts).expand_as(logps)
    ratio = torch.exp(log_ratio)
    if aggregation(loss_type) == "seq-mean-token-sum-norm" and max_completion_length is None:
        raise ValueError(f"loss_type {loss_type!r} needs max_completion_length")
    settings = LossSettings(epsilon_low, epsilon_high, delta, *sapo_temperatures)
    surrogate = policy_loss(policy, ratio, adv, logps, settings)
    per_token = surrogate.per_token
    if sampler_weights is not None:
        per_token = per_token * sampler_weights
    pg_loss = aggregate(per_token, mask, loss_type, max_completion_length, num_tokens)
    kl_penalty = logps.new_zeros(())
    use_kl = ref_logps is not None and beta != 0.0
    if use_kl:
        kl = per_token_kl(logps, ref_logps)
        kl_penalty = aggregate(beta * kl, mask, loss_type, max_completion_length, num_tokens)
    loss = pg_loss + kl_penalty

    with torch.no_grad():
        low, high = surrogate.low, surrogate.high  # where the clip changed a token's term
        metrics = {
            "kl": _masked_mean(kl, mask) if use_kl else logps.new_zeros(()),
            "clip_ratio/low_mean": _masked_mean(low.to(mask.dtype), mask),
            "clip_ratio/high_mean": _masked_mean(high.to(mask.dtype), mask),
            "clip_ratio/region_mean": _masked_mean((low | high).to(mask.dtype), mask),
            "pg_loss": pg_loss,
            "kl_penalty": kl_penalty,
        }
    return loss, {k: v.detach() for k, v in metrics.items()}


def aggregate(
    per_token: Tensor,
    mask: Tensor,
    loss_type: str,
    max_completion_length: int | None,
    num_tokens: Tensor | float | None = None,
) -> Tensor:
    """Per-token terms [N, T] to one number, as `loss_type` says: `seq-mean-token-mean`
    (`grpo`) the mean over sequences of token means; `token-mean` (`bnpo`, `dapo`) token sum /
    token count (`num_tokens` when given: on P processes whose gradients are averaged, the
    global batch's count / P, so the average is the global token mean, as TRL does);
    `seq-mean-token-sum-norm` (`dr_grpo`) token sum / (N * max_completion_length)."""
    how = aggregation(loss_type)
    if how == "seq-mean-token-mean":
        return ((per_token * mask).sum(1) / mask.sum(1).clamp(min=1.0)).mean()
    if how == "token-mean":
        count = mask.sum() if num_tokens is None else torch.as_tensor(num_tokens)
        return (per_token * mask).sum() / count.to(per_token.dtype).clamp(min=1.0)
    return (per_token * mask).sum() / (per_token.size(0) * max_completion_length)


def entropy_threshold(entropies: Tensor, keep: float) -> float:
    """The entropy at or above which a token stays in the policy term when the top `keep`
    share of tokens by entropy are kept (`algo.top_entropy_quantile`, "Beyond the 80/20
    rule"): the (1 - keep) quantile of `entropies`, every counted token's of the update, with
    linear interpolation. keep 1.0 keeps every token; 0.0 only the highest."""
    if entropies.numel() == 0:
        return math.inf
    return float(torch.quantile(entropies.float(), 1.0 - keep))


def to_whole_batch(
    loss: Tensor,
    metrics: dict[str, Tensor],
    loss_type: str,
    row_share: Tensor,
    token_share: Tensor,
) -> tuple[Tensor, dict[str, Tensor]]:
    """A part of the batch's share of the whole batch's loss and of its token-mean metrics:
    the part's contribution, so that the contributions of parts that cover the batch add up
    to its values. A part whose advantages are 0 without a KL term adds 0, so the part with
    non-zero advantages alone gives the whole batch's values.

    `row_share` is the part's share of the completions, `token_share` of the completion
    tokens. Token-normalised losses (`bnpo`, `dapo`) are computed with the whole batch's
    token count as `num_tokens` and stay as they are; the others (`grpo`, `dr_grpo`: means
    over completions) scale by the row share. The KL and clip ratios are means over tokens,
    so they scale by the token share.
    """
    token_mean = aggregation(loss_type) == "token-mean"
    share = torch.ones_like(row_share) if token_mean else row_share
    scaled = loss * share
    metrics = dict(metrics)
    for name in ("pg_loss", "kl_penalty"):
        metrics[name] = metrics[name] * share
    for name in ("kl", "clip_ratio/low_mean", "clip_ratio/high_mean", "clip_ratio/region_mean"):
        metrics[name] = metrics[name] * token_share
    return scaled, metrics


def sampler_correction(
    old_logps: Tensor, sampler_logps: Tensor, mask: Tensor, cap: float
) -> tuple[Tensor, dict[str, Tensor]]:
    """Truncated importance weights [N, T] for tokens drawn by a sampler whose probabilities
    differ from the trained network's (vLLM's kernels, a lagging copy of the weights):
    min(pi_old / pi_sampler, cap) per token, detached, 0 on padding; and their mean and the
    share of tokens at the cap, over the mask."""
    mask = mask.to(old_logps.dtype)
    ratio = torch.exp((old_logps - sampler_logps).detach())
    weights = torch.clamp(ratio, max=cap) * mask
    metrics = {
        "sampler/is_weight_mean": _masked_mean(weights, mask),
        "sampler/is_capped_ratio": _masked_mean((ratio > cap).to(mask.dtype), mask),
        "sampler/logp_diff_mean": _masked_mean((old_logps - sampler_logps).detach().abs(), mask),
    }
    return weights, metrics
