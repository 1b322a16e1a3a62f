"""Small Llama networks built in code for the decoding-step tests: random norms, LoRA that
matters, left-padded prompts, and the modules' own log-probs to compare with."""

from __future__ import annotations

from typing import Any

import torch
from peft import LoraConfig, get_peft_model
from torch import Tensor, nn
from transformers import LlamaConfig, LlamaForCausalLM, Qwen2Config, Qwen2ForCausalLM

from src.model.positions import position_ids

SMALL = {
    "vocab_size": 61,
    "hidden_size": 64,
    "intermediate_size": 96,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,  # two query heads per key/value head
    "max_position_embeddings": 64,
    "pad_token_id": 0,
}


def small_llama(**overrides: Any) -> nn.Module:
    """A two-layer Llama (seed 0) with random norm weights, in eval mode."""
    torch.manual_seed(0)
    return with_random_norms(LlamaForCausalLM(LlamaConfig(**{**SMALL, **overrides})).eval())


def with_random_norms(network: nn.Module) -> nn.Module:
    """`network` with every RMSNorm weight drawn from [0.5, 1.5] instead of all ones, so a
    norm weight applied to the wrong axis or left out shows in the logits."""
    torch.manual_seed(3)
    for name, parameter in network.named_parameters():
        if "norm" in name:
            parameter.data.uniform_(0.5, 1.5)
    return network


def with_lora(network: nn.Module, **lora: Any) -> nn.Module:
    """`network` under a LoRA adapter on every linear layer, its B matrices non-zero."""
    config = LoraConfig(r=4, lora_alpha=8, target_modules="all-linear", **lora)
    network = get_peft_model(network, config)
    torch.manual_seed(1)
    for name, parameter in network.named_parameters():
        if "lora_B" in name:
            parameter.data.normal_(0.0, 0.05)
    return network.eval()


def module_logits(
    network: nn.Module, prompt_ids: Tensor, prompt_mask: Tensor, group_size: int, tokens: Tensor
) -> Tensor:
    """The same as `stepped_logits`, from one forward of the modules over the whole rows."""
    ids = torch.cat([prompt_ids.repeat_interleave(group_size, dim=0), tokens], dim=1)
    mask = torch.cat(
        [prompt_mask.repeat_interleave(group_size, dim=0), torch.ones_like(tokens)], dim=1
    )
    with torch.no_grad():
        logits = network(input_ids=ids, attention_mask=mask, position_ids=position_ids(mask))
    return torch.log_softmax(logits.logits[:, prompt_ids.size(1) - 1 :].float(), dim=-1)


def prompts(vocab: int) -> tuple[Tensor, Tensor]:
    """Two prompts, the second left-padded by two positions."""
    torch.manual_seed(2)
    ids = torch.randint(1, vocab, (2, 6))
    mask = torch.ones_like(ids)
    ids[1, :2], mask[1, :2] = 0, 0
    return ids, mask


def stepped_logits(
    steps: Any, prompt_ids: Tensor, prompt_mask: Tensor, group_size: int, tokens: Tensor
) -> Tensor:
    """Log-softmax [rows, 1 + T, V] of the prompts' last position's logits and each new
    position's through decoding `steps` (built for the rows): the prompts' `prefill`, then the
    tokens [rows, T] fed one at a time (each step's logits copied: a replayed graph's output
    is overwritten by the next step)."""
    assert steps is not None
    with torch.no_grad():
        first = steps.prefill(prompt_ids, prompt_mask, group_size, tokens.size(1))
        position = prompt_mask.repeat_interleave(group_size, dim=0).sum(dim=1, keepdim=True)
        found = [steps.step(tokens[:, t], position + t).clone() for t in range(tokens.size(1))]
    found.insert(0, first.repeat_interleave(group_size, dim=0))
    return torch.log_softmax(torch.stack(found, dim=1).float(), dim=-1)


# the networks both fused steps serve, with their test ids: the modules' log-probs to rounding
SERVED = {
    "gqa": lambda: small_llama(),
    "mha": lambda: small_llama(num_key_value_heads=4),
    "lora": lambda: with_lora(small_llama()),
    "biases": lambda: small_llama(attention_bias=True, mlp_bias=True),
    "qwen2": lambda: with_random_norms(Qwen2ForCausalLM(Qwen2Config(**SMALL)).eval()),  # q/k/v bias
}


def decoded_both_ways(
    lm: Any, fast: Any, sampling: Any, new_tokens: int, group_size: int = 3
) -> tuple[Tensor, Tensor]:
    """The tokens `lm` (a `CausalLM`, in eval mode for the call) decodes for two prompts
    through its modules (`ModuleSteps`) and through the steps `fast(network, rows)` builds,
    each from seed 3."""
    from src.model.steps import ModuleSteps
    from src.rollout.decode import Ending, decode

    batch = lm.encode_prompts(["What is 12 + 30?\nAnswer:", "Hi"])
    network = lm.network.eval()
    try:
        runs = []
        for steps in (ModuleSteps(network, lm.keeps_few_logits), fast(network, 2 * group_size)):
            torch.manual_seed(3)
            runs.append(
                decode(
                    steps,
                    batch["input_ids"],
                    batch["attention_mask"],
                    group_size,
                    sampling,
                    Ending(new_tokens, lm.eos_token_ids, lm.tokenizer.pad_token_id),
                ).tokens
            )
    finally:
        network.train()
    return runs[0], runs[1]
