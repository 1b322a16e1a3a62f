"""`model=tiny`: a small Llama and a byte-level tokenizer, built in code and saved as a folder.

The folder is then loaded through `from_pretrained` like any downloaded model, so tests and
the default run exercise the same loading path as a 9B model, with no hub access.
"""

from __future__ import annotations

from pathlib import Path

import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers
from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

from src.utils.folders import published_folder

SPECIAL_TOKENS = ("<pad>", "<s>", "</s>")


def byte_level_tokenizer() -> PreTrainedTokenizerFast:
    """One token per byte (256) plus pad, BOS and EOS: any text encodes, nothing is unknown."""
    byte_to_unicode = pre_tokenizers.ByteLevel.alphabet()
    vocab = {symbol: i for i, symbol in enumerate(sorted(byte_to_unicode))}
    for token in SPECIAL_TOKENS:
        vocab[token] = len(vocab)
    backend = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    backend.decoder = decoders.ByteLevel()
    backend.add_special_tokens(list(SPECIAL_TOKENS))
    return PreTrainedTokenizerFast(
        tokenizer_object=backend,
        pad_token="<pad>",
        bos_token="<s>",
        eos_token="</s>",
        padding_side="left",
    )


def build_tiny_llama(
    path: str | Path,
    hidden_size: int = 128,
    num_layers: int = 4,
    num_heads: int = 4,
    intermediate_size: int = 512,
    max_position_embeddings: int = 256,
    seed: int = 0,
) -> Path:
    """Write a randomly initialised Llama and its tokenizer to `path` and return the path."""
    path = Path(path)
    tokenizer = byte_level_tokenizer()
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=hidden_size,
        intermediate_size=intermediate_size,
        num_hidden_layers=num_layers,
        num_attention_heads=num_heads,
        num_key_value_heads=num_heads,
        max_position_embeddings=max_position_embeddings,
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        tie_word_embeddings=True,
    )
    generator_state = torch.random.get_rng_state()
    torch.manual_seed(seed)
    model = LlamaForCausalLM(config)
    torch.random.set_rng_state(generator_state)
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    with published_folder(path) as partial:  # jobs of a sweep may build it at the same time
        model.save_pretrained(partial)
        tokenizer.save_pretrained(partial)
    return path
