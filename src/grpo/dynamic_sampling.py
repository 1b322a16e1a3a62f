"""DAPO's dynamic sampling: a group whose G rewards are all equal has zero advantage everywhere
and teaches nothing (with no KL term it adds nothing to the gradient), so it is dropped and the
next batch of prompts is sampled, until `batch_size` groups with a spread are in hand or the
step's rounds are spent (`algo.sampling_rounds`; verl's `filter_groups` with
`max_num_gen_batches`). docs/objective.md#dynamic-sampling.

The step's prompts come from the data loader `rounds` batches at a time: the first batch is
sampled always, the others are the reserve the later rounds draw from, in order. Kept groups
beyond `batch_size` are dropped, as verl does; a step whose rounds ran out trains on the groups
it kept (fewer than `batch_size`), or, when it kept none, on its last round as it was.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from src.grpo.metrics import tied_groups
from src.policy.episode import Episode, join_episodes


def sample_with_spread(
    sample: Callable[[list[dict[str, Any]]], Episode],
    rows: list[dict[str, Any]],
    rounds: int,
    group_size: int,
    pad_token_id: int,
) -> tuple[Episode, dict[str, float]]:
    """Sample `rows` (`rounds` batches of prompts) a batch at a time with `sample`, keeping the
    groups with a spread, until a batch's worth is kept. Returns the episode to train on and
    the metrics `dynamic_sampling/*`: rollouts (batches sampled), groups_dropped (zero-spread
    groups among them), zero_spread_share (their share of the groups sampled) and
    groups_missing (how many short of a full batch the step trains)."""
    if len(rows) % rounds:
        raise ValueError(f"{len(rows)} rows do not split into {rounds} sampling rounds")
    batch_size = len(rows) // rounds
    kept: list[Episode] = []
    count = dropped = sampled = 0
    episode = None
    for start in range(0, len(rows), batch_size):
        episode = sample(rows[start : start + batch_size])
        sampled += 1
        spread = ~tied_groups(episode.rewards, group_size)
        dropped += int((~spread).sum())
        if spread.any():
            kept.append(episode.groups(spread, group_size))
            count += int(spread.sum())
        if count >= batch_size:
            break
    assert episode is not None  # at least one round
    if kept:
        episode = join_episodes(kept, pad_token_id)
        if count > batch_size:
            episode = episode.groups(torch.arange(count) < batch_size, group_size)
    metrics = {
        "dynamic_sampling/rollouts": float(sampled),
        "dynamic_sampling/groups_dropped": float(dropped),
        "dynamic_sampling/zero_spread_share": dropped / (sampled * batch_size),
        "dynamic_sampling/groups_missing": float(max(batch_size - count, 0)),
    }
    return episode, metrics
