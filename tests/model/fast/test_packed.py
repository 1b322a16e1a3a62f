"""Decoding with packed, LoRA-merged weights: the same products as the modules, within float
rounding, and the modules exactly as they were afterwards."""

import contextlib

import pytest
import torch
from torch import nn

from src.model.fast.packed import MIN_PACKED_ELEMENTS, can_pack, packed_linears
from src.rollout.hf import HFSampler
from tests.helpers.models import lora_lm as moved_lora_lm

pytestmark = pytest.mark.skipif(not can_pack(4), reason="torch built without MKL")


def lora_lm(tiny_lm, **lora):
    """The tiny Llama with a moved adapter on every linear layer, in eval mode (decoding)."""
    lm = moved_lora_lm(tiny_lm, **lora)
    lm.network.eval()
    return lm


def logits(lm, ids):
    with torch.no_grad():
        return lm.network(input_ids=ids).logits


@pytest.mark.parametrize("lora", [{}, {"use_dora": True}], ids=["lora", "dora"])
def test_packed_products_match_the_modules_and_leave_them_as_they_were(tiny_lm, lora):
    lm = lora_lm(tiny_lm, **lora)
    ids = torch.randint(0, 259, (4, 1))  # 4 rows of one token: a decoding step's shape
    weights = {k: v.clone() for k, v in lm.network.state_dict().items()}
    before = logits(lm, ids)
    with packed_linears(lm.network, rows=4, min_elements=0) as packed:
        during = logits(lm, ids)
        other_rows = logits(lm, ids[:3])  # another batch size goes through the modules
    assert packed > 0
    assert not torch.equal(before, logits_without_adapter(lm, ids))  # the adapter matters
    assert torch.allclose(during, before, atol=1e-5)
    assert torch.equal(other_rows, logits(lm, ids[:3]))
    assert torch.equal(logits(lm, ids), before)
    assert all(torch.equal(v, weights[k]) for k, v in lm.network.state_dict().items())
    assert not any("forward" in vars(module) for module in lm.network.modules())


def logits_without_adapter(lm, ids):
    with lm.network.disable_adapter():
        return logits(lm, ids)


def test_plain_lora_layers_are_packed_merged_and_dora_ones_are_not(tiny_lm):
    plain, dora = lora_lm(tiny_lm), lora_lm(tiny_lm, use_dora=True)
    with packed_linears(plain.network, rows=4, min_elements=0) as merged_layers:
        pass
    with packed_linears(dora.network, rows=4, min_elements=0) as base_layers:
        pass
    lora_layers = sum(1 for m in plain.network.modules() if hasattr(m, "lora_A"))
    assert merged_layers == lora_layers + 1  # each LoRA layer once, and the vocabulary head
    assert base_layers == 3 * lora_layers + 1  # DoRA: base, A and B apart; its own path runs


def test_nothing_is_packed_in_training_mode_small_weights_or_one_row(tiny_lm):
    lm = lora_lm(tiny_lm)
    small = MIN_PACKED_ELEMENTS  # what MKL's packing needs; oneDNN packs any size
    with packed_linears(lm.network, rows=4, min_elements=small) as packed:
        assert packed == 0  # the tiny model's weights are small
    with packed_linears(lm.network, rows=1, min_elements=0) as packed:
        assert packed == 0  # a matrix-vector product has nothing to pack
    lm.network.train()
    with packed_linears(lm.network, rows=4, min_elements=0) as packed:
        assert packed == 0  # dropout would not match a merged product


def test_a_failure_inside_the_block_restores_the_modules():
    layer = nn.Linear(64, 64).eval()
    x = torch.randn(2, 64)
    expected = layer(x)
    packing = packed_linears(layer, rows=2, min_elements=0)
    with pytest.raises(RuntimeError, match="boom"), packing as packed:
        assert packed == 1
        raise RuntimeError("boom")
    assert "forward" not in vars(layer)
    assert torch.equal(layer(x), expected)


def test_sampler_setting_turns_packing_off(tiny_lm, monkeypatch):
    calls = []
    monkeypatch.setattr(
        "src.model.fast.decoding.packed_linears", lambda *a: calls.append(a) or _none()
    )
    HFSampler(max_completion_length=2, packed_weights=False, fused_steps=False).sample(
        tiny_lm, ["Hi"], 2
    )
    assert calls == []
    HFSampler(max_completion_length=2, fused_steps=False).sample(tiny_lm, ["Hi", "Ho"], 2)
    assert [rows for _, rows in calls] == [4]  # its decoding; the probe packs through its own
    # the tiny Llama's own decoding steps replace the packed modules
    HFSampler(max_completion_length=2).sample(tiny_lm, ["Hi", "Ho"], 2)
    assert len(calls) == 1


def _none():
    return contextlib.nullcontext(0)
