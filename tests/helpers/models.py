"""Small models for tests: the tiny Llama with a LoRA adapter that matters."""

from __future__ import annotations

from typing import Any

import torch

from src.model.causal_lm import CausalLM, load_causal_lm


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
