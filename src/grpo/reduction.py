"""The update's loss and metrics brought together: over the passes of one process
(`combine_passes`) and over processes (`reduce_loss_metrics`)."""

from __future__ import annotations

from dataclasses import dataclass

from torch import Tensor

from src.utils.distributed import gather_objects, sum_over_processes, world_size


@dataclass
class UpdatePlan:
    """The rows an update runs through the network and the counts its loss is normalised by."""

    trained: Tensor  # [N] bool: the rows that go through the network
    counted: bool  # whether this process's entropy counts (it trains rows, or no process does)
    all_tokens: Tensor  # completion tokens of all this process's rows
    num_tokens: Tensor | float  # what bnpo/dapo divide by: the global token count / processes
    entropy_threshold: float | None = (
        None  # top_entropy_quantile: tokens below it leave the policy term
    )


TOKEN_MEANS = ("kl", "clip_ratio/low_mean", "clip_ratio/high_mean", "clip_ratio/region_mean")
PART_MEANS = ("entropy", "mean_log_prob", "sampler/is_weight_mean", "sampler/is_capped_ratio")


def is_part_mean(name: str) -> bool:
    """Whether metric `name` is a mean over the tokens of the rows run (weighted by
    `part_tokens`): entropy, mean log-prob and every sampler figure but the largest."""
    return name in PART_MEANS or (name.startswith("sampler/") and not is_largest(name))


def is_largest(name: str) -> bool:
    """Whether metric `name` is a largest value (`*_max`): the largest over passes and
    processes."""
    return name.endswith("_max")


def reduce_loss_metrics(
    loss: Tensor, metrics: dict[str, Tensor], weights: dict[str, float]
) -> dict[str, float]:
    """The loss and its metrics of the global batch from each process's (every process must
    call this): losses are means over processes (each is normalised so that their mean is
    the global loss), token means are weighted by each process's token counts."""
    sums: dict[str, float] = {"loss": float(loss.detach()), **weights}
    largest = {name: float(value) for name, value in metrics.items() if is_largest(name)}
    if largest and world_size() > 1:
        everyone = gather_objects(largest)
        largest = {name: max(each[name] for each in everyone) for name in largest}
    for name, value in metrics.items():
        if is_largest(name):
            continue
        weight = (
            weights["tokens"]
            if name in TOKEN_MEANS
            else weights["part_tokens"]
            if is_part_mean(name)
            else 1.0
        )
        sums[name] = float(value) * weight
    total = sum_over_processes(sums)
    processes = world_size()
    reduced = {}
    for name in ["loss", *metrics]:
        if is_largest(name):
            reduced[name] = largest[name]
        elif name in TOKEN_MEANS:
            reduced[name] = total[name] / max(total["tokens"], 1.0)
        elif is_part_mean(name):
            reduced[name] = total[name] / max(total["part_tokens"], 1.0)
        else:
            reduced[name] = total[name] / processes
    return reduced


def combine_passes(
    results: list[tuple[Tensor, dict[str, Tensor], dict[str, float]]],
) -> tuple[Tensor, dict[str, Tensor], dict[str, float]]:
    """One process's loss, metrics and weights from those of its passes over disjoint rows,
    each divided by the whole update's counts (`objective.Denominators`): losses, loss parts
    and token means add up; means over the rows run (entropy, ...) are weighted by each
    pass's tokens."""
    if len(results) == 1:
        return results[0]
    loss = sum(result[0] for result in results)
    part_tokens = sum(result[2]["part_tokens"] for result in results)
    metrics = {}
    for name in results[0][1]:
        if is_part_mean(name):
            total = sum(result[1][name] * result[2]["part_tokens"] for result in results)
            metrics[name] = total / max(part_tokens, 1.0)
        elif is_largest(name):
            metrics[name] = max(result[1][name] for result in results)
        else:
            metrics[name] = sum(result[1][name] for result in results)
    return loss, metrics, {**results[0][2], "part_tokens": part_tokens}
