"""`hardware=grad_ckpt` (`model.gradient_checkpointing`): every block recomputed in the backward
pass with torch's non-reentrant checkpoint, under LoRA and 4-bit too, with the same gradients.

Non-reentrant, because the reentrant variant drops the gradients of a block whose inputs need
none (frozen embeddings under LoRA) unless input gradients are forced on, and does not mix
with DDP's gradient hooks; transformers and torch both recommend it."""

from __future__ import annotations

import pytest
import torch

from src.model.causal_lm import load_causal_lm
from src.model.tiny import build_tiny_llama

LORA = {"r": 4, "lora_alpha": 8, "lora_dropout": 0.0, "target_modules": "all-linear"}


def load(models_dir, **kwargs):
    torch.manual_seed(0)  # the same fresh adapter in every load
    return load_causal_lm(
        str(models_dir / "tiny_llama_h128_l4"), builder=build_tiny_llama, **kwargs
    )


def checkpointed_blocks(lm) -> list:
    return [
        module
        for module in lm.network.modules()
        if type(module).__name__ == "LlamaDecoderLayer" and module.gradient_checkpointing
    ]


def gradients(lm) -> dict[str, torch.Tensor]:
    """Gradients of the trained weights after one backward pass of a fixed batch."""
    ids = torch.arange(2 * 12).reshape(2, 12) % 250
    logits = lm.network(input_ids=ids, attention_mask=torch.ones_like(ids), use_cache=False).logits
    logits.float().logsumexp(-1).sum().backward()
    return {name: p.grad for name, p in lm.named_parameters() if p.requires_grad}


def check_checkpointing(models_dir, **kwargs) -> None:
    lm = load(models_dir, gradient_checkpointing=True, **kwargs)
    blocks = checkpointed_blocks(lm)
    assert len(blocks) == 4  # every block of the tiny model
    for block in blocks:
        assert block._gradient_checkpointing_func.keywords.get("use_reentrant") is False
    assert lm.network.training
    ckpt = gradients(lm)
    assert ckpt and all(grad is not None for grad in ckpt.values())
    plain = gradients(load(models_dir, **kwargs))
    assert ckpt.keys() == plain.keys()
    for name, grad in plain.items():
        assert torch.allclose(ckpt[name], grad, atol=1e-5), name


@pytest.mark.parametrize("lora", [None, LORA], ids=["full", "lora"])
def test_checkpointing_is_non_reentrant_with_the_same_gradients(models_dir, lora):
    check_checkpointing(models_dir, lora=lora)


def test_4bit_lora_checkpointing_is_non_reentrant_too(models_dir):
    check_checkpointing(models_dir, lora=LORA, load_in_4bit=True)
