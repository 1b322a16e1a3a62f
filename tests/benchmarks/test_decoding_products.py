"""The decoding products benchmark times four kernels that compute the same products."""

from __future__ import annotations

import sys

import pytest
import torch

from src.model.fast import onednn
from src.model.fast.packed import can_pack
from src.utils.resolvers import PROJECT_ROOT

sys.path.insert(0, str(PROJECT_ROOT / "benchmarks"))
import decoding_products  # noqa: E402

pytestmark = pytest.mark.skipif(
    not (onednn.available() and can_pack(4)), reason="torch built without oneDNN or MKL"
)


def test_every_kernel_multiplies_every_weight_alike():
    generator = torch.Generator().manual_seed(0)
    weights = [torch.randn(12, 8, generator=generator), torch.randn(8, 12, generator=generator)]
    kernels = decoding_products.step_kernels(weights, rows=4)
    assert len(kernels) == 4
    plain = kernels["F.linear (MKL)"]()
    assert [tuple(p.shape) for p in plain] == [(4, 12), (4, 8)]
    for name, kernel in kernels.items():
        for ours, theirs in zip(kernel(), plain, strict=True):
            assert (ours - theirs).abs().max() <= 1e-5 * theirs.abs().max(), name


def test_by_shape_times_each_distinct_shape_once_with_its_count(capsys):
    generator = torch.Generator().manual_seed(0)
    weights = [torch.randn(12, 8, generator=generator) for _ in range(3)]
    weights.append(torch.randn(5, 8, generator=generator))
    found = decoding_products.by_shape(weights, rows=4, rounds=2)
    assert {shape: count for shape, (count, _) in found.items()} == {(12, 8): 3, (5, 8): 1}
    for _, seconds in found.values():
        assert set(seconds) == set(decoding_products.step_kernels(weights[:1], 4))
        assert all(value > 0 for value in seconds.values())
    decoding_products.print_by_shape(found, rows=4)
    lines = capsys.readouterr().out.splitlines()
    assert lines[1].lstrip().startswith("4 x 8 -> 12") and lines[2].lstrip().startswith(
        "4 x 8 -> 5"
    )
    assert lines[-1].lstrip().startswith("one pass, every weight")


def test_the_kernels_take_turns_after_a_round_that_warms_them_up():
    calls = []
    kernels = {name: (lambda name=name: calls.append(name)) for name in ("a", "b")}
    times = decoding_products.taking_turns(kernels, rounds=2, before=lambda: calls.append("-"))
    assert calls == ["-", "b", "-", "a", "-", "a", "-", "b", "-", "b", "-", "a"]
    assert {name: len(seconds) for name, seconds in times.items()} == {"a": 2, "b": 2}
