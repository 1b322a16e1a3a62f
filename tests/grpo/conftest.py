"""Fixtures of the update tests: a rollout of the tiny model and its own copy of the model."""

import pytest
import torch

from src.model.causal_lm import load_causal_lm
from src.rollout.hf import HFSampler


@pytest.fixture(scope="module")
def rollout_and_lm(tiny_lm):
    """Three prompts x 4 completions of up to 6 tokens, and a private copy of the tiny model."""
    lm = load_causal_lm(tiny_lm.network.name_or_path)  # a private copy
    torch.manual_seed(1)
    prompts = ["What is 11 + 22?\nAnswer:", "Hi", "What is 5 + 5?\nAnswer:"]
    return HFSampler(max_completion_length=6).sample(lm, prompts, group_size=4), lm
