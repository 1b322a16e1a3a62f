"""Fast paths are built under their probe's guard: a release that renames what building one
reads (a transformers attribute, a torch private op, a peft adapter tensor) gives one warning
and the plain path's result, never a crashed run."""

from __future__ import annotations

import logging

import torch

from src.model.fast import packed
from src.model.fast.decoding import decoding_steps
from src.model.fast.llama_steps import LlamaSteps
from src.model.fast.probe import forget_verdicts, standing
from src.model.steps import ModuleSteps
from src.rollout.decode import Ending, Sampling, decode
from tests.helpers.small_llama import SMALL, prompts, small_llama, with_lora


def decoded(network, steps):
    ids, mask = prompts(SMALL["vocab_size"])
    torch.manual_seed(4)
    return decode(steps, ids, mask, 2, Sampling(min_new_tokens=6), Ending(6, [1], 0)).tokens


def through_the_chosen_steps(network, caplog):
    """The tokens of the steps `decoding_steps` picks, the type it picked, and the log."""
    forget_verdicts()
    with caplog.at_level(logging.WARNING), decoding_steps(network, 4) as steps:
        tokens = decoded(network, steps)
        kind = type(steps)
    return tokens, kind


def test_a_renamed_layer_attribute_leaves_decoding_to_the_modules(caplog):
    network = small_llama()

    class Renamed(type(network.config)):
        """A release that renamed a config field only the fused steps read (the norms keep
        their own copy, `variance_epsilon`)."""

        @property
        def rms_norm_eps(self):
            raise AttributeError("'LlamaConfig' object has no attribute 'rms_norm_eps'")

    network.config.__class__ = Renamed
    tokens, kind = through_the_chosen_steps(network, caplog)
    assert kind is not LlamaSteps
    assert "fast path fused_steps could not be built" in caplog.text
    assert "AttributeError" in standing("fused_steps", network).error
    assert torch.equal(tokens, decoded(network, ModuleSteps(network)))
    forget_verdicts()


def test_a_missing_mkl_op_leaves_the_unpacked_steps(caplog, monkeypatch):
    def missing(*args, **kwargs):
        raise AttributeError("'_OpNamespace' 'mkl' object has no attribute '_mkl_linear'")

    monkeypatch.setattr(packed, "can_pack", lambda rows: True)  # as on an MKL build
    monkeypatch.setattr("src.model.fast.llama_steps.can_pack", lambda rows: True)
    monkeypatch.setattr("src.model.fast.decoding.can_pack", lambda rows: True)
    monkeypatch.setattr("src.model.fast.llama_steps.packed_product", missing)
    monkeypatch.setattr("src.model.fast.llama_steps.smallest_packed", lambda through_onednn: 0)
    network = small_llama()
    tokens, kind = through_the_chosen_steps(network, caplog)
    assert kind is LlamaSteps  # the unpacked fused steps, proven on their own
    assert "fast path fused_steps+packed_weights could not be built" in caplog.text
    assert standing("fused_steps", network).proven
    assert torch.equal(tokens, decoded(network, ModuleSteps(network)))
    forget_verdicts()


def test_a_peft_layer_without_lora_a_leaves_decoding_to_the_modules(caplog, monkeypatch):
    def renamed(module, adapter):  # peft renamed its adapter tensors
        raise AttributeError("'Linear' object has no attribute 'lora_A'")

    monkeypatch.setattr(packed, "_vanilla", renamed)
    network = with_lora(small_llama())
    tokens, kind = through_the_chosen_steps(network, caplog)
    assert kind is not LlamaSteps
    assert "could not be built" in caplog.text and "lora_A" in caplog.text
    assert torch.equal(tokens, decoded(network, ModuleSteps(network)))
    forget_verdicts()
