"""Policy losses: the per-token term the policy gradient comes from, each a small pure function
registered by name (`algo.policy_loss`); docs/objective.md#policy-losses states every formula.

Each takes the importance ratio rho = pi / pi_old [N, T] (token- or sequence-level, with its
gradient), the advantages [N, 1], the current log-probs [N, T] and the settings, and returns
the per-token loss to minimise with the tokens where a clip or cap changed the term. Nothing
here aggregates: `src.grpo.objective.aggregate` does, with the batch's denominators.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import Tensor

from src.utils.registry import Registry


@dataclass(frozen=True)
class LossSettings:
    """The knobs of the policy losses (`algo.*`, TRL's names), at TRL's defaults: clip 0.2 on
    both sides, no delta, SAPO's 1.0 / 1.05. `AlgoSettings` takes its defaults from here."""

    epsilon_low: float = 0.2  # clip: rho >= 1 - epsilon_low
    epsilon_high: float = 0.2  # clip: rho <= 1 + epsilon_high; cispo: the weight's cap itself
    delta: float | None = None  # clip: rho <= delta also for negative advantages (two-sided)
    sapo_temperature_pos: float = 1.0  # sapo: the gate's temperature where A > 0
    sapo_temperature_neg: float = 1.05  # sapo: where A <= 0


@dataclass(frozen=True)
class Surrogate:
    """A policy loss's per-token terms and where its clip changed them (for the clip ratios)."""

    per_token: Tensor  # [N, T] the term to minimise
    low: Tensor  # [N, T] bool: the ratio's lower bound changed the term
    high: Tensor  # [N, T] bool: the ratio's upper bound (or cap) changed the term


PolicyLoss = Callable[[Tensor, Tensor, Tensor, LossSettings], Surrogate]
# registered by name, the value of `algo.policy_loss`, each with the `LossSettings` fields it
# reads (`reads`): a set value of another one changes nothing
POLICY_LOSSES: Registry[PolicyLoss] = Registry("policy loss")


def register_policy_loss(name: str, reads: tuple[str, ...]) -> Callable[[PolicyLoss], PolicyLoss]:
    """Register a policy loss under `name` with the `LossSettings` fields it `reads`."""
    unknown = set(reads) - {field.name for field in dataclasses.fields(LossSettings)}
    if unknown:
        raise ValueError(f"policy loss {name!r} reads no such settings: {sorted(unknown)}")
    return POLICY_LOSSES.register(name, reads=reads)


def settings_read(name: str) -> tuple[str, ...]:
    """The `LossSettings` fields policy loss `name` reads."""
    return POLICY_LOSSES.facts[name]["reads"]


def policy_loss(
    name: str, ratio: Tensor, advantages: Tensor, logps: Tensor, settings: LossSettings
) -> Surrogate:
    """The per-token terms of policy loss `name` (one of `POLICY_LOSSES`)."""
    return POLICY_LOSSES.named(name)(ratio, advantages, logps, settings)


@register_policy_loss("clip", reads=("epsilon_low", "epsilon_high", "delta"))
def clipped_surrogate(
    ratio: Tensor, advantages: Tensor, logps: Tensor, settings: LossSettings
) -> Surrogate:
    """PPO's clipped surrogate, -min(rho A, clip(rho, 1 - eps_low, 1 + eps_high) A); with
    `delta` the unclipped rho is capped at delta too, which bounds the term of a negative
    advantage (INTELLECT-2's two-sided clip)."""
    clipped = torch.clamp(ratio, 1 - settings.epsilon_low, 1 + settings.epsilon_high)
    unclipped = ratio if settings.delta is None else torch.clamp(ratio, max=settings.delta)
    per_token = -torch.min(unclipped * advantages, clipped * advantages)
    with torch.no_grad():
        low = (ratio < 1 - settings.epsilon_low) & (advantages < 0)
        high = (ratio > 1 + settings.epsilon_high) & (advantages > 0)
        if settings.delta is not None:
            high = high | ((ratio > settings.delta) & (advantages < 0))
    return Surrogate(per_token, low, high)


@register_policy_loss("cispo", reads=("epsilon_high",))
def cispo_surrogate(
    ratio: Tensor, advantages: Tensor, logps: Tensor, settings: LossSettings
) -> Surrogate:
    """CISPO (MiniMax-M1): the importance weight is capped at epsilon_high and detached, and
    multiplies the log-prob, -sg(min(rho, eps_high)) A log pi: every token keeps a gradient,
    however far its ratio moved."""
    weight = torch.clamp(ratio, max=settings.epsilon_high).detach()
    per_token = -weight * advantages * logps
    with torch.no_grad():
        high = (ratio > settings.epsilon_high) & (advantages != 0)
    return Surrogate(per_token, torch.zeros_like(high), high)


@register_policy_loss("sapo", reads=("sapo_temperature_pos", "sapo_temperature_neg"))
def soft_gated_surrogate(
    ratio: Tensor, advantages: Tensor, logps: Tensor, settings: LossSettings
) -> Surrogate:
    """SAPO: a smooth gate instead of the clip, -(4 / tau) sigmoid(tau (rho - 1)) A, with tau
    `sapo_temperature_pos` where A > 0 and `sapo_temperature_neg` elsewhere; its gradient at
    rho = 1 is the plain policy gradient's and fades as rho leaves 1. Nothing is clipped."""
    positive = advantages > 0
    tau = torch.where(positive, settings.sapo_temperature_pos, settings.sapo_temperature_neg)
    tau = tau.to(ratio.dtype)
    per_token = -torch.sigmoid(tau * (ratio - 1)) * 4 / tau * advantages
    nothing = torch.zeros_like(ratio, dtype=torch.bool)
    return Surrogate(per_token, nothing, nothing)
