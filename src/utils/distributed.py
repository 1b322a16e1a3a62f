"""Collectives over the processes of a multi-process run, each a no-op in a single process.

A run on several processes (Lightning DDP or FSDP) keeps one process group; these helpers
read it from `torch.distributed` when they are called, so code that uses them runs unchanged
on one process, and data loaders built before the processes start still split correctly.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import torch
import torch.distributed as dist
from torch import Tensor

BUCKET_ELEMENTS = 2**24  # gradients are averaged in flat buckets of at most this many numbers


def is_distributed() -> bool:
    """Whether a process group with more than one process is running."""
    return dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1


def world_size() -> int:
    """The number of processes of the run (1 without a process group)."""
    return dist.get_world_size() if is_distributed() else 1


def rank() -> int:
    """This process's global rank (0 without a process group)."""
    return dist.get_rank() if is_distributed() else 0


def collective_device() -> torch.device:
    """Where tensors must be for the process group's backend: the current CUDA device under
    NCCL, the CPU otherwise."""
    if is_distributed() and dist.get_backend() == "nccl":
        return torch.device("cuda", torch.cuda.current_device())
    return torch.device("cpu")


def sum_over_processes(values: Mapping[str, float | Tensor]) -> dict[str, float]:
    """Each value summed over the processes (one all-reduce for all of them), as floats."""
    names = list(values)
    if not names:
        return {}
    stacked = torch.tensor(
        [float(values[name]) for name in names], dtype=torch.float64, device=collective_device()
    )
    if is_distributed():
        dist.all_reduce(stacked)
    return dict(zip(names, stacked.tolist(), strict=True))


def gather_objects(value: Any) -> list[Any]:
    """`value` of every process (picklable), in rank order; `[value]` on one process."""
    if not is_distributed():
        return [value]
    gathered: list[Any] = [None] * world_size()
    dist.all_gather_object(gathered, value)
    return gathered


@torch.no_grad()
def average_gradients(parameters: Iterable[torch.nn.Parameter]) -> None:
    """Replace every gradient by its mean over the processes, in a few flat all-reduces.

    DDP does this inside each backward; a step with several backward passes per forward
    (PPO-style updates) skips DDP's own reduction and calls this after each instead.
    """
    if not is_distributed():
        return
    grads = [p.grad for p in parameters if p.grad is not None]
    scale = 1.0 / world_size()
    bucket: list[Tensor] = []
    for grad in grads:
        bucket.append(grad)
        if sum(g.numel() for g in bucket) >= BUCKET_ELEMENTS:
            _average_bucket(bucket, scale)
            bucket = []
    if bucket:
        _average_bucket(bucket, scale)


def _average_bucket(grads: list[Tensor], scale: float) -> None:
    """One all-reduce of the flattened `grads`, written back scaled by `scale`."""
    by_dtype: dict[torch.dtype, list[Tensor]] = {}
    for grad in grads:
        by_dtype.setdefault(grad.dtype, []).append(grad)
    for same in by_dtype.values():
        flat = torch.cat([g.reshape(-1) for g in same]).to(collective_device())
        dist.all_reduce(flat)
        flat.mul_(scale)
        offset = 0
        for grad in same:
            grad.copy_(flat[offset : offset + grad.numel()].view_as(grad))
            offset += grad.numel()


def sharded_norm(grads: Iterable[Tensor]) -> Tensor:
    """The 2-norm of gradients split over the processes (FSDP shards): each process holds a
    disjoint part, so the squares are summed over processes before the root."""
    squares = [g.detach().float().pow(2).sum() for g in grads]
    local = torch.stack(squares).sum() if squares else torch.zeros(())
    total = sum_over_processes({"sq": local})["sq"]
    return torch.tensor(total).sqrt().float()
