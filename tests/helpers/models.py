"""Small models for tests: the tiny Llama with a LoRA adapter that matters."""

from __future__ import annotations

from typing import Any

import torch

from src.model.causal_lm import CausalLM, load_causal_lm
from src.rollout.rollout import Rollout


def lora_lm(
    tiny_lm: CausalLM, target_modules: Any = "all-linear", std: float = 0.05, **lora: Any
) -> CausalLM:
    """The tiny Llama with a LoRA adapter (r 4, alpha 8) on `target_modules`, its B matrices
    drawn with `std` from seed 1, so adapter on and off differ (a fresh adapter adds nothing,
    which would hide a wrong merge); `std=0` keeps the fresh adapter. DoRA magnitudes
    (`use_dora=True`) are drawn around 0.5."""
    lm = load_causal_lm(
        tiny_lm.network.name_or_path,
        lora={"r": 4, "lora_alpha": 8, "target_modules": target_modules, **lora},
    )
    if std:
        torch.manual_seed(1)
        for name, parameter in lm.network.named_parameters():
            if "lora_B" in name or "lora_magnitude" in name:
                parameter.data.normal_(0.5 if "magnitude" in name else 0.0, std)
    return lm


def random_rollout(
    lm: CausalLM, prompts: list[str], group_size: int = 4, width: int = 12, seed: int = 0
) -> Rollout:
    """`group_size` completions of `width` random byte tokens per prompt, as a sampler would
    return them (no padding): sequences to score without sampling."""
    batch = lm.encode_prompts(prompts)
    rows = len(prompts) * group_size
    generator = torch.Generator().manual_seed(seed)
    completions = torch.randint(0, 250, (rows, width), generator=generator)
    return Rollout(
        prompt_ids=batch["input_ids"].repeat_interleave(group_size, dim=0),
        prompt_mask=batch["attention_mask"].repeat_interleave(group_size, dim=0),
        completion_ids=completions,
        completion_mask=torch.ones_like(completions),
        is_clipped=torch.zeros(rows, dtype=torch.bool),
        completions=[""] * rows,
    )
