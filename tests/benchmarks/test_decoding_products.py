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
