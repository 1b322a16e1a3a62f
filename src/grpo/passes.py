"""Which rows of a rollout go through the network together in an update: passes of at most a
token budget, so the activations kept for backward are bounded by the budget, not the batch.

A pass's tokens are counted as the grouped forward reads them (`CausalLM.log_probs`): each
distinct prompt once, at the pass's padded prompt width, plus every completion at the pass's
padded completion width. Passes are contiguous runs of rows of about equal cost, cut between
prompt groups where that keeps them within the budget, so a group's prompt is read once.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from src.rollout.rollout import Rollout


def row_runs(rollout: Rollout) -> Tensor:
    """Per row, the index of its run of neighbouring rows with the same prompt (ids and mask)."""
    prompts = torch.cat([rollout.prompt_ids, rollout.prompt_mask], dim=1).cpu()
    starts = torch.ones(prompts.size(0), dtype=torch.long)
    starts[1:] = (prompts[1:] != prompts[:-1]).any(dim=1)
    return starts.cumsum(dim=0) - 1


def pass_cost(prompt_tokens: Tensor, completion_tokens: Tensor, runs: Tensor) -> int:
    """Tokens a pass over these rows reads: distinct prompts at the longest prompt's width,
    every completion at the longest completion's width."""
    distinct = int(torch.unique_consecutive(runs).numel())
    return distinct * int(prompt_tokens.max()) + runs.numel() * int(completion_tokens.max())


def token_passes(rollout: Rollout, max_tokens: int | None, at_least: int = 1) -> list[Tensor]:
    """Row indices of each pass, in row order, covering every row once: one pass when
    `max_tokens` is None or the whole rollout fits, else the fewest (and at least `at_least`)
    contiguous passes of about equal cost within the budget. A single row over the budget is a
    pass of its own (a row cannot be split)."""
    prompt_tokens = rollout.prompt_mask.sum(dim=1).cpu()
    completion_tokens = rollout.completion_mask.sum(dim=1).clamp(min=1).cpu()
    runs = row_runs(rollout)
    rows = runs.numel()
    total = pass_cost(prompt_tokens, completion_tokens, runs)
    count = max(at_least, 1 if max_tokens is None else math.ceil(total / max_tokens))
    while True:
        passes = split_rows(runs, prompt_tokens, completion_tokens, min(count, rows))
        fits = max_tokens is None or all(
            pass_cost(prompt_tokens[p], completion_tokens[p], runs[p]) <= max_tokens
            for p in passes
            if p.numel() > 1
        )
        if fits or count >= rows:
            return passes
        count += 1


def split_rows(
    runs: Tensor, prompt_tokens: Tensor, completion_tokens: Tensor, count: int
) -> list[Tensor]:
    """`count` contiguous, non-empty passes of about equal cost; cuts fall between runs of one
    prompt when there are at least `count` runs, else anywhere."""
    rows = runs.numel()
    # each row's share of the cost: its completion, plus its prompt where its run starts
    starts = torch.ones(rows, dtype=torch.bool)
    starts[1:] = runs[1:] != runs[:-1]
    cost = completion_tokens.double() + prompt_tokens.double() * starts
    ends = cost.cumsum(dim=0)  # cost up to and including each row
    allowed = starts.clone() if int(starts.sum()) >= count else torch.ones(rows, dtype=torch.bool)
    allowed[0] = False  # a cut before row r: r must start a run (when runs are respected)
    cuts: list[int] = []
    for k in range(1, count):
        target = float(ends[-1]) * k / count
        low = (cuts[-1] + 1) if cuts else 1  # keep every pass non-empty
        high = rows - (count - k)
        candidates = [r for r in range(low, high + 1) if allowed[r]] or list(range(low, high + 1))
        cuts.append(min(candidates, key=lambda r: abs(float(ends[r - 1]) - target)))
    bounds = [0, *cuts, rows]
    return [torch.arange(a, b) for a, b in zip(bounds, bounds[1:], strict=False)]
