"""The frozen base of an adapted network at work inside a role: greedy generation (a planner, a
generator that writes its answer) and picking an option by likelihood (a generator that
chooses). Both are batched over everything asked at once; identical prompts run once; a
context is read once for all its options (its key/value cache is shared)."""

from __future__ import annotations

from collections.abc import Hashable
from typing import TypeVar

import torch

from src.model.network import AdaptedNetwork
from src.rollout.sampler import Sampler

T = TypeVar("T", bound=Hashable)


def unique(items: list[T]) -> tuple[list[T], list[int]]:
    """The distinct items in first-seen order, and each item's index among them."""
    index: dict[T, int] = {}
    positions = [index.setdefault(item, len(index)) for item in items]
    return list(index), positions


@torch.no_grad()
def frozen_generate(
    network: AdaptedNetwork, sampler: Sampler, prompts: list[str], batch_size: int = 16
) -> list[str]:
    """The base model's greedy completion of each prompt (adapter off)."""
    distinct, positions = unique(prompts)
    answers: list[str] = []
    with network.adapter_disabled():
        for start in range(0, len(distinct), batch_size):
            batch = distinct[start : start + batch_size]
            answers += sampler.sample(network, batch, 1, greedy=True).completions
    return [answers[i] for i in positions]


@torch.no_grad()
def frozen_option_scores(
    network: AdaptedNetwork, contexts: list[str], options: list[list[str]], batch_size: int = 16
) -> list[list[float]]:
    """For each context, the base model's score of each option as its continuation: the mean
    log-prob per option token (length-normalised, so long options are not penalised), adapter
    off. Options are scored as written; prefix them with a space."""
    asked = [(context, tuple(choices)) for context, choices in zip(contexts, options, strict=True)]
    distinct, positions = unique(asked)
    scores: list[list[float]] = []
    with network.adapter_disabled():
        for start in range(0, len(distinct), batch_size):
            batch = distinct[start : start + batch_size]
            found = network.continuation_scores([c for c, _ in batch], [list(o) for _, o in batch])
            scores += [[float(value) for value in row] for row in found]
    return [scores[i] for i in positions]
