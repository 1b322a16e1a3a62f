"""Small Gemma 3 networks built in code (no weights travel): every part where Gemma 3 differs
from Llama is present and matters, so a step that leaves one out shows in the logits."""

from __future__ import annotations

from typing import Any

import torch
from torch import nn
from transformers import Gemma3ForCausalLM, Gemma3TextConfig

from tests.helpers.small_llama import SMALL

GEMMA = {
    **SMALL,
    "head_dim": 16,
    "query_pre_attn_scalar": 24,  # not head_dim: the attention's scale must come from it
    "sliding_window": 4,  # shorter than the probe's and the tests' prompts
    "layer_types": ["sliding_attention", "full_attention", "sliding_attention"],
    "num_hidden_layers": 3,
    "rope_parameters": {
        "sliding_attention": {"rope_type": "default", "rope_theta": 10.0},
        "full_attention": {"rope_type": "default", "rope_theta": 1000.0},
    },
    "final_logit_softcapping": None,
    "attn_logit_softcapping": None,
}


def small_gemma(**overrides: Any) -> nn.Module:
    """A three-layer Gemma 3 (seed 0, float32, eval mode): sliding layers of window 4 beside a
    global one with another rotary base, and every RMSNorm weight (query and key norms, four
    per layer, the final one) drawn from [-0.5, 0.5], so (1 + w) differs from 1 and from w."""
    torch.manual_seed(0)
    network = Gemma3ForCausalLM(Gemma3TextConfig(**{**GEMMA, **overrides}))
    torch.manual_seed(3)
    for name, parameter in network.named_parameters():
        if "norm" in name:
            parameter.data.uniform_(-0.5, 0.5)
    return network.eval()


def bos_tokenizer(adds_bos: bool = True, chat_template: str | None = None) -> Any:
    """The tiny model's byte-level tokenizer, adding its BOS `<s>` first as Gemma's does
    (`adds_bos`), with `chat_template` if given."""
    from tokenizers import processors

    from src.model.tiny import byte_level_tokenizer

    tokenizer = byte_level_tokenizer()
    if adds_bos:
        bos = (tokenizer.bos_token, tokenizer.bos_token_id)
        tokenizer.backend_tokenizer.post_processor = processors.TemplateProcessing(
            single="<s> $A", pair="<s> $A <s> $B", special_tokens=[bos]
        )
    tokenizer.chat_template = chat_template
    return tokenizer


# a chat template that writes the BOS itself, as Gemma's does, and one that writes none
BOS_TEMPLATE = "{{ bos_token }}{% for m in messages %}{{ m['content'] }}\n{% endfor %}"
PLAIN_TEMPLATE = "{% for m in messages %}{{ m['content'] }}\n{% endfor %}"


def build_small_gemma_folder(path: Any) -> Any:
    """A small random Gemma 3 (as `small_gemma`, over the byte-level tokenizer that adds its
    BOS) saved as a model folder, so a task runs with `model=gemma3_270m
    model.name_or_path=FOLDER` as it would on the real weights, in seconds."""
    from pathlib import Path

    path = Path(path)
    if (path / "config.json").is_file():
        return path
    tokenizer = bos_tokenizer()
    ids = {
        "vocab_size": len(tokenizer),
        "pad_token_id": tokenizer.pad_token_id,
        "bos_token_id": tokenizer.bos_token_id,
        "eos_token_id": tokenizer.eos_token_id,
    }
    network = small_gemma(**ids, max_position_embeddings=4096, hidden_size=64)
    network.generation_config.pad_token_id = tokenizer.pad_token_id
    network.generation_config.eos_token_id = tokenizer.eos_token_id
    network.save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path
