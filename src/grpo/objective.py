"""The GRPO objective as pure tensor functions; docs/objective.md states every formula.

Nothing here knows about models or configs, so every term can be checked by hand in tests.
Shapes: N = B * G completions, T = completion length; completions of prompt i sit at rows
i*G ... i*G+G-1.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import Tensor

from src.grpo.policy_losses import LossSettings, policy_loss
from src.utils.registry import Registry

# TRL's loss_type names for the aggregations (registered below, named for what they do, as
# verl's loss_agg_mode): `algo.loss_type` takes either.
TRL_LOSS_TYPES = {
    "grpo": "seq-mean-token-mean",
    "bnpo": "token-mean",
    "dapo": "token-mean",
    "dr_grpo": "seq-mean-token-sum-norm",
}
RATIO_LEVELS = ("token", "sequence")


def per_token_kl(logps: Tensor, ref_logps: Tensor) -> Tensor:
    """k3 estimator of KL(policy || reference) per token; zero where both agree, never negative."""
    delta = ref_logps - logps
    return torch.exp(delta) - delta - 1


@dataclass(frozen=True)
class Denominators:
    """What the aggregations and the metrics divide by, counted over the whole update before
    it is split into passes (verl's global denominators): the losses of passes over disjoint
    rows then simply add up to the update's, and on P processes whose gradients are averaged,
    to the global batch's. None: the count of the rows given (one pass, one process)."""

    tokens: Tensor | float | None = None  # token-mean: the global batch's counted tokens / P
    sequences: Tensor | float | None = None  # seq-mean-*: the global batch's completions / P
    metric_tokens: Tensor | float | None = None  # kl and clip ratios: this process's tokens


# (each sequence's token sum [N], mask [N, T], sequence count, denominators,
# max_completion_length) -> the aggregated loss
Aggregation = Callable[[Tensor, Tensor, Tensor, Denominators, int | None], Tensor]
# registered by name, the values of `algo.loss_type` with TRL's aliases
AGGREGATIONS: Registry[Aggregation] = Registry("aggregation")


@AGGREGATIONS.register("seq-mean-token-mean")
def _seq_mean_token_mean(
    total: Tensor, mask: Tensor, sequences: Tensor, counts: Denominators, _: int | None
) -> Tensor:
    """The sum over sequences of their token means / the sequence count (`grpo`)."""
    return (total / mask.sum(1).clamp(min=1.0)).sum() / sequences


@AGGREGATIONS.register("token-mean")
def _token_mean(
    total: Tensor, mask: Tensor, sequences: Tensor, counts: Denominators, _: int | None
) -> Tensor:
    """Token sum / token count (`bnpo`, `dapo`)."""
    return total.sum() / _count(counts.tokens, mask.sum())


@AGGREGATIONS.register("seq-mean-token-sum-norm")
def _seq_mean_token_sum_norm(
    total: Tensor,
    mask: Tensor,
    sequences: Tensor,
    counts: Denominators,
    max_completion_length: int | None,
) -> Tensor:
    """Token sum / (sequence count * max_completion_length) (`dr_grpo`; `grpo_loss` refuses
    it without one)."""
    return total.sum() / (sequences * max_completion_length)


LOSS_TYPES = (*TRL_LOSS_TYPES, *AGGREGATIONS)


def aggregation(loss_type: str) -> str:
    """The aggregation `loss_type` names (one of AGGREGATIONS; TRL's names are aliases)."""
    if loss_type not in LOSS_TYPES:
        raise ValueError(f"loss_type must be one of {LOSS_TYPES}, got {loss_type!r}")
    return TRL_LOSS_TYPES.get(loss_type, loss_type)


def _masked_mean(values: Tensor, mask: Tensor) -> Tensor:
    return (values * mask).sum() / mask.sum().clamp(min=1.0)


def _count(given: Tensor | float | None, own: Tensor) -> Tensor:
    count = own if given is None else torch.as_tensor(given, device=own.device)
    return count.to(own.dtype).clamp(min=1.0)


DEFAULT_KNOBS = LossSettings()  # the policy losses' knobs at TRL's defaults


@dataclass(frozen=True)
class Objective:
    """What `grpo_loss` computes, apart from its tensors (a run's come from `AlgoSettings`)."""

    loss_type: str  # the aggregation (or TRL's name for it): `AGGREGATIONS`
    beta: float = 0.0  # the KL term's weight; 0 drops it
    max_completion_length: int | None = None  # the constant seq-mean-token-sum-norm divides by
    ratio_level: str = "token"  # token, or sequence (GSPO: a completion's geometric mean ratio)
    policy: str = "clip"  # the per-token policy loss: `src.grpo.policy_losses.POLICY_LOSSES`
    knobs: LossSettings = DEFAULT_KNOBS  # the policy loss's clip, cap and temperatures


@dataclass(frozen=True)
class TokenLogProbs:
    """Per-token log-probs [N, T] of the completions under the policy now (with its gradient),
    under the policy that sampled them (None: this update is the first on the rollout, ratio
    1) and under the reference (None: no KL term)."""

    current: Tensor
    old: Tensor | None = None
    ref: Tensor | None = None


def grpo_loss(
    logps: TokenLogProbs,
    advantages: Tensor,
    mask: Tensor,
    objective: Objective,
    denominators: Denominators | None = None,
    sampler_weights: Tensor | None = None,
) -> tuple[Tensor, dict[str, Tensor]]:
    """Policy loss `objective.policy` (the clipped surrogate by default) plus beta * KL,
    aggregated as `objective.loss_type` says.

    The log-probs and mask are [N, T]; advantages is [N]. `denominators` are what the
    aggregation and the token-mean metrics divide by (None: the counts of these rows);
    `sampler_weights` [N, T] multiply each token's surrogate (the truncated importance weight
    of a sampler that differs from the trained network, see `sampler_correction`). Ratio level
    `sequence` (GSPO) gives every token of a completion the completion's ratio, the geometric
    mean of its token ratios. Returns the scalar loss and detached metrics.
    """
    loss_type, beta = objective.loss_type, objective.beta
    aggregation(loss_type)  # refuses an unknown name before any work
    current = logps.current
    mask = mask.to(current.dtype)
    old_logps = current.detach() if logps.old is None else logps.old
    adv = advantages.unsqueeze(1)

    if objective.ratio_level not in RATIO_LEVELS:
        raise ValueError(
            f"ratio_level must be one of {RATIO_LEVELS}, got {objective.ratio_level!r}"
        )
    log_ratio = current - old_logps
    if objective.ratio_level == "sequence":  # GSPO: exp of the completion's mean token log-ratio
        counts = mask.sum(dim=1, keepdim=True).clamp(min=1.0)
        log_ratio = ((log_ratio * mask).sum(dim=1, keepdim=True) / counts).expand_as(current)
    ratio = torch.exp(log_ratio)
    longest = objective.max_completion_length
    if aggregation(loss_type) == "seq-mean-token-sum-norm" and longest is None:
        raise ValueError(f"loss_type {loss_type!r} needs max_completion_length")
    surrogate = policy_loss(objective.policy, ratio, adv, current, objective.knobs)
    per_token = surrogate.per_token
    if sampler_weights is not None:
        per_token = per_token * sampler_weights
    counts = denominators or Denominators()
    pg_loss = aggregate(per_token, mask, loss_type, longest, counts)
    kl_penalty = current.new_zeros(())
    use_kl = logps.ref is not None and beta != 0.0
    if use_kl:
        kl = per_token_kl(current, logps.ref)
        kl_penalty = aggregate(beta * kl, mask, loss_type, longest, counts)
    loss = pg_loss + kl_penalty

    with torch.no_grad():
        low, high = surrogate.low, surrogate.high  # where the clip changed a token's term
        tokens = _count(counts.metric_tokens, mask.sum())

        def token_mean(values: Tensor) -> Tensor:
            return (values.to(mask.dtype) * mask).sum() / tokens

        metrics = {
            "kl": token_mean(kl) if use_kl else current.new_zeros(()),
            "clip_ratio/low_mean": token_mean(low),
            "clip_ratio/high_mean": token_mean(high),
            "clip_ratio/region_mean": token_mean(low | high),
            "pg_loss": pg_loss,
            "kl_penalty": kl_penalty,
        }
    return loss, {k: v.detach() for k, v in metrics.items()}


def aggregate(
    per_token: Tensor,
    mask: Tensor,
    loss_type: str,
    max_completion_length: int | None,
    denominators: Denominators | None = None,
) -> Tensor:
    """Per-token terms [N, T] to one number, as `loss_type` says, dividing by `denominators`
    (None: these rows' counts): `seq-mean-token-mean` (`grpo`) the sum over sequences of
    their token means / the sequence count; `token-mean` (`bnpo`, `dapo`) token sum / token
    count; `seq-mean-token-sum-norm` (`dr_grpo`) token sum / (sequence count *
    max_completion_length). With the global batch's counts over P processes, P processes'
    averaged losses give the global batch's (as TRL and verl do)."""
    how = AGGREGATIONS.named(aggregation(loss_type))
    counts = denominators or Denominators()
    mask = mask.to(per_token.dtype)
    total = (per_token * mask).sum(1)  # [N] each sequence's token sum
    sequences = _count(counts.sequences, mask.new_tensor(float(per_token.size(0))))
    return how(total, mask, sequences, counts, max_completion_length)


def entropy_threshold(entropies: Tensor, keep: float) -> float:
    """The entropy at or above which a token stays in the policy term when the top `keep`
    share of tokens by entropy are kept (`algo.top_entropy_quantile`, "Beyond the 80/20
    rule"): the (1 - keep) quantile of `entropies`, every counted token's of the update, with
    linear interpolation. keep 1.0 keeps every token; 0.0 only the highest."""
    if entropies.numel() == 0:
        return math.inf
    return float(torch.quantile(entropies.float(), 1.0 - keep))


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
    }
    return weights, metrics


def sampler_mismatch(
    trainer_logps: Tensor, sampler_logps: Tensor, mask: Tensor
) -> dict[str, Tensor]:
    """How far the sampler's log-probs of the tokens it drew lie from the trainer's before
    the update (its kernels, its precision), over the tokens of `mask`: per token, the mean
    and the largest |l_trainer - l_sampler|; per sequence, the mean and the largest
    |sum over its tokens of (l_trainer - l_sampler)|, the log of the sequence's probability
    ratio (over the rows with a counted token)."""
    mask = mask.to(trainer_logps.dtype)
    gap = (trainer_logps - sampler_logps).detach() * mask
    per_token = gap.abs()
    rows = mask.sum(dim=1) > 0
    per_sequence = gap.sum(dim=1).abs()[rows]
    zero = per_token.new_zeros(())
    return {
        "sampler/logp_diff_mean": _masked_mean(per_token, mask),
        "sampler/logp_diff_max": per_token.max() if per_token.numel() else zero,
        "sampler/seq_logp_diff_mean": per_sequence.mean() if rows.any() else zero,
        "sampler/seq_logp_diff_max": per_sequence.max() if rows.any() else zero,
    }
