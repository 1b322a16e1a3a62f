"""The fixed-shape decoding step (`StaticSteps`, what the GPU replays as a CUDA graph): the
modules' logits to float rounding, the same tokens and draws as `ModuleSteps`, no host value
read by a step, and the probe that turns a wrong step away."""

import logging

import pytest
import torch

from src.model.fast.decoding import decoding_steps
from src.model.fast.probe import forget_verdicts, standing
from src.model.fast.static_steps import StaticSteps
from src.model.steps import ModuleSteps
from src.rollout.decode import Ending, Sampling, decode
from tests.helpers.small_llama import (
    SERVED,
    SMALL,
    decoded_both_ways,
    module_logits,
    prompts,
    small_llama,
    stepped_logits,
)


def static_logits(network, prompt_ids, prompt_mask, group_size, tokens):
    """`stepped_logits` through `StaticSteps`."""
    steps = StaticSteps.of(network, prompt_ids.size(0) * group_size)
    return stepped_logits(steps, prompt_ids, prompt_mask, group_size, tokens)


@pytest.mark.parametrize("build", SERVED.values(), ids=SERVED.keys())
def test_static_steps_give_the_modules_log_probs(build):
    network = build()
    ids, mask = prompts(SMALL["vocab_size"])
    tokens = torch.randint(1, SMALL["vocab_size"], (6, 5))
    ours = static_logits(network, ids, mask, 3, tokens)
    assert ours.shape == (6, 6, SMALL["vocab_size"])
    assert (ours - module_logits(network, ids, mask, 3, tokens)).abs().max() < 1e-5


def test_bfloat16_networks_are_served_within_the_probes_tolerance():
    network = small_llama().to(torch.bfloat16)
    ids, mask = prompts(SMALL["vocab_size"])
    tokens = torch.randint(1, SMALL["vocab_size"], (4, 4))
    ours = static_logits(network, ids, mask, 2, tokens)
    theirs = module_logits(network, ids, mask, 2, tokens)
    assert not ours.isnan().any()
    assert (ours - theirs).abs().max() < 5e-2  # TOLERANCE[bfloat16]


def test_a_fully_padded_start_reads_as_the_modules_do():
    network = small_llama()
    ids, mask = prompts(SMALL["vocab_size"])
    mask[1, :5], ids[1, :5] = 0, 0  # the second prompt is one real token after five pads
    tokens = torch.randint(1, SMALL["vocab_size"], (4, 3))
    ours = static_logits(network, ids, mask, 2, tokens)
    assert not ours.isnan().any()
    assert (ours - module_logits(network, ids, mask, 2, tokens)).abs().max() < 1e-5


def test_a_step_reads_no_host_value_and_keeps_its_buffers():
    """What a CUDA graph needs: every step the same kernels on the same buffers. The host's
    count of positions is wiped after the prefill; the steps still give the modules' logits,
    and the cache, the mask and the write position stay the same tensors throughout."""
    network = small_llama()
    ids, mask = prompts(SMALL["vocab_size"])
    tokens = torch.randint(1, SMALL["vocab_size"], (4, 4))
    steps = StaticSteps.of(network, 4)
    with torch.no_grad():
        first = steps.prefill(ids, mask, 2, tokens.size(1))
        steps.filled = None  # a step that read it would fail
        buffers = [t.data_ptr() for t in (*steps.keys, *steps.values, steps.allowed, steps.at)]
        position = mask.repeat_interleave(2, dim=0).sum(dim=1, keepdim=True)
        found = [steps.step(tokens[:, t], position + t) for t in range(tokens.size(1))]
    after = [t.data_ptr() for t in (*steps.keys, *steps.values, steps.allowed, steps.at)]
    assert after == buffers
    assert int(steps.at) == ids.size(1) + tokens.size(1)
    ours = torch.log_softmax(torch.stack([first.repeat_interleave(2, dim=0), *found], 1), -1)
    assert (ours - module_logits(network, ids, mask, 2, tokens)).abs().max() < 1e-5


@pytest.mark.parametrize("greedy", [True, False], ids=["greedy", "sampled"])
def test_tiny_model_decodes_the_same_tokens_as_the_modules(tiny_lm, greedy):
    sampling = Sampling(greedy=True) if greedy else Sampling(temperature=0.9, min_new_tokens=4)
    modules, static = decoded_both_ways(tiny_lm, StaticSteps.of, sampling, 12)
    assert modules.size(1) >= 4
    assert torch.equal(modules, static)


def test_static_steps_are_probed_and_a_wrong_one_is_turned_away(caplog, monkeypatch):
    forget_verdicts()
    network = small_llama()
    with decoding_steps(network, 4, static=True) as steps:
        assert isinstance(steps, StaticSteps)
    assert standing("static_steps", network).proven

    forget_verdicts()
    right = StaticSteps._last_hidden

    def planted(self, tokens, positions):  # one wrong weight's worth of error
        return right(self, tokens, positions) * 1.05

    monkeypatch.setattr(StaticSteps, "_last_hidden", planted)
    ids, mask = prompts(SMALL["vocab_size"])
    with caplog.at_level(logging.WARNING), decoding_steps(network, 4, static=True) as steps:
        assert not isinstance(steps, StaticSteps)
        fallback = decode(steps, ids, mask, 2, Sampling(greedy=True), Ending(6, [1], 0)).tokens
    assert not standing("static_steps", network).proven
    assert "fast path static_steps disagrees" in caplog.text
    modules = decode(
        ModuleSteps(network), ids, mask, 2, Sampling(greedy=True), Ending(6, [1], 0)
    ).tokens
    assert torch.equal(fallback, modules)
    forget_verdicts()


def test_what_static_steps_do_not_serve_goes_through_the_modules():
    assert StaticSteps.of(small_llama().train(), rows=4) is None
    assert StaticSteps.of(small_llama(hidden_act="gelu"), rows=4) is None
    assert StaticSteps.of(small_llama().to(torch.bfloat16), rows=4) is not None


def test_static_steps_that_cannot_be_built_leave_decoding_to_the_modules(caplog, monkeypatch):
    """A release that moves what `StaticSteps.of` reads must not stop a run: one warning, and
    the next steps down decode."""

    def moved(*args, **kwargs):
        raise AttributeError("'LlamaAttention' object has no attribute 'scaling'")

    monkeypatch.setattr(StaticSteps, "of", moved)
    forget_verdicts()
    network = small_llama()
    with caplog.at_level(logging.WARNING), decoding_steps(network, 4, static=True) as steps:
        assert not isinstance(steps, StaticSteps)
    assert "fast path static_steps could not be built" in caplog.text
    assert not standing("static_steps", network).proven
    forget_verdicts()
