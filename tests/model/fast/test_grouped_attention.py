"""Grouped-query attention shared in the kernel (`grouped_attention`): `sdpa`'s values and
gradients over left-padded rows, switched on only where proven, and refused when wrong."""

from types import SimpleNamespace

import pytest
import torch
from transformers import LlamaConfig, LlamaForCausalLM

from src.model.fast import grouped_attention
from src.model.fast.grouped_attention import NAME, check_grouped, use_grouped_attention
from src.model.fast.probe import OFF_VARIABLE, verdicts
from src.model.positions import position_ids
from tests.helpers.small_llama import SMALL, small_llama, with_lora


def padded_batch():
    torch.manual_seed(5)
    ids = torch.randint(1, SMALL["vocab_size"], (3, 9))
    mask = torch.ones_like(ids)
    mask[0, :4] = 0  # left padding, as every log-prob pass of a rollout has
    mask[2, :1] = 0
    return {"input_ids": ids, "attention_mask": mask, "position_ids": position_ids(mask)}


def logits_and_grads(network, inputs):
    network.zero_grad()
    logits = network(**inputs, use_cache=False).logits
    weights = torch.rand(logits.shape, generator=torch.Generator().manual_seed(2))
    (logits * weights).sum().backward()
    grads = {name: p.grad.clone() for name, p in network.named_parameters() if p.grad is not None}
    return logits.detach(), grads


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_the_shared_heads_give_sdpas_logits_and_gradients(dtype):
    network = small_llama().train()
    inputs = padded_batch()
    with torch.autocast("cpu", dtype=dtype, enabled=dtype != torch.float32):
        plain, plain_grads = logits_and_grads(network, inputs)
        assert use_grouped_attention(network)
        assert network.config._attn_implementation == NAME
        grouped, grads = logits_and_grads(network, inputs)
    tolerance = 1e-5 if dtype == torch.float32 else 2e-2
    keep = inputs["attention_mask"].bool()  # padded positions' outputs are never read
    assert (grouped - plain)[keep].abs().max() <= tolerance * plain.abs().max()
    assert grads.keys() == plain_grads.keys() and len(grads) > 0
    for name, grad in grads.items():
        assert (grad - plain_grads[name]).abs().max() <= tolerance * (
            plain_grads[name].abs().max() + 1e-6
        ), name


def test_a_peft_network_is_switched_below_its_adapters_and_kept_so():
    network = with_lora(small_llama())
    assert use_grouped_attention(network) and use_grouped_attention(network)
    assert network.get_base_model().config._attn_implementation == NAME
    assert [v.path for v in verdicts()].count("grouped_attention") == 1  # probed once


def test_one_key_value_head_per_query_head_is_left_as_it_is():
    network = small_llama(num_key_value_heads=SMALL["num_attention_heads"])
    assert not use_grouped_attention(network)
    assert network.config._attn_implementation == "sdpa"
    assert "grouped_attention" not in [v.path for v in verdicts()]


def test_eager_attention_is_left_as_it_is():
    torch.manual_seed(0)
    config = LlamaConfig(**SMALL)
    config._attn_implementation = "eager"
    network = LlamaForCausalLM(config).eval()
    assert not use_grouped_attention(network)
    assert network.config._attn_implementation == "eager"


def test_a_planted_error_is_refused_and_sdpa_stays(monkeypatch):
    """Attention that drops the padding mask (what a release changing a keyword could do) is
    caught by the probe on left-padded rows: the network stays on `sdpa`."""

    real = torch.nn.functional.scaled_dot_product_attention

    def unmasked(query, key, value, attn_mask=None, **kwargs):
        return real(query, key, value, **kwargs)

    # the module's own functions only: `sdpa`, the plain side, keeps torch's
    monkeypatch.setattr(
        grouped_attention, "F", SimpleNamespace(scaled_dot_product_attention=unmasked)
    )
    network = small_llama()
    assert check_grouped(network) > 0.01
    assert network.config._attn_implementation == "sdpa"  # left as it was
    assert not use_grouped_attention(network)
    assert network.config._attn_implementation == "sdpa"


def test_turned_off_by_name(monkeypatch):
    monkeypatch.setenv(OFF_VARIABLE, "grouped_attention")
    network = small_llama()
    assert not use_grouped_attention(network)
    assert network.config._attn_implementation == "sdpa"
