"""The collectives of `src.utils.distributed` on two real processes (gloo), and on one."""

from __future__ import annotations

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from src.tracking.local_server import free_port
from src.utils.distributed import (
    average_gradients,
    gather_objects,
    rank,
    sharded_norm,
    sum_over_processes,
    world_size,
)

FULL_GRADIENT = torch.arange(1.0, 8.0)  # split 3 + 4 over the two processes as FSDP shards


def on_each_process(process: int, port: int, results: dict) -> None:
    dist.init_process_group(
        "gloo", init_method=f"tcp://127.0.0.1:{port}", rank=process, world_size=2
    )
    try:
        found = {"rank": rank(), "world": world_size()}
        found["sums"] = sum_over_processes({"a": 1.0 + process, "b": torch.tensor(2.0)})
        found["objects"] = gather_objects({"process": process})
        weight = torch.nn.Parameter(torch.zeros(3))
        weight.grad = torch.full((3,), 2.0 + 2 * process)  # 2 and 4: the mean is 3
        average_gradients([weight])
        found["averaged"] = weight.grad.tolist()
        shard = FULL_GRADIENT[:3] if process == 0 else FULL_GRADIENT[3:]
        found["norm"] = float(sharded_norm([shard]))
        results[process] = found
    finally:
        dist.destroy_process_group()


def test_collectives_over_two_processes():
    results = mp.Manager().dict()
    mp.spawn(on_each_process, args=(free_port(), results), nprocs=2, join=True)
    for process in (0, 1):
        found = results[process]
        assert found["rank"] == process and found["world"] == 2
        assert found["sums"] == {"a": 3.0, "b": 4.0}
        assert found["objects"] == [{"process": 0}, {"process": 1}]
        assert found["averaged"] == [3.0, 3.0, 3.0]
        assert abs(found["norm"] - float(FULL_GRADIENT.norm())) < 1e-6


def test_on_one_process_every_collective_is_the_value_itself():
    assert (rank(), world_size()) == (0, 1)
    assert sum_over_processes({"a": 2.5}) == {"a": 2.5}
    assert gather_objects("x") == ["x"]
    weight = torch.nn.Parameter(torch.zeros(2))
    weight.grad = torch.tensor([1.0, 2.0])
    average_gradients([weight])
    assert weight.grad.tolist() == [1.0, 2.0]
    assert float(sharded_norm([torch.tensor([3.0, 4.0])])) == 5.0
