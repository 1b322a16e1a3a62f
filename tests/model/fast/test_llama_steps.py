"""Our own decoding step for Llama-family networks: the modules' logits to float rounding, for
plain, grouped-query, LoRA and biased networks; and the modules' path for what it does not
serve."""

import pytest
import torch

from src.model.fast import llama_steps
from src.model.fast.llama_steps import LlamaSteps
from src.rollout.decode import Sampling
from src.rollout.hf import HFSampler
from tests.helpers.small_llama import (
    SERVED,
    SMALL,
    decoded_both_ways,
    module_logits,
    prompts,
    small_llama,
    stepped_logits,
    with_lora,
)


def step_logits(network, prompt_ids, prompt_mask, group_size, tokens):
    """`stepped_logits` through `LlamaSteps`."""
    steps = LlamaSteps.of(network, prompt_ids.size(0) * group_size)
    return stepped_logits(steps, prompt_ids, prompt_mask, group_size, tokens)


@pytest.fixture(params=[1, 10_000], ids=["prompt-once-per-group", "row-by-row"])
def attention_route(request, monkeypatch):
    """Both routes of a step's attention over a group's shared prompt: read once for the group
    (`_grouped_attention`, from `GROUPED_FROM` columns on; the test prompts are short) and row
    by row."""
    monkeypatch.setattr(llama_steps, "GROUPED_FROM", request.param)
    return request.param


@pytest.fixture(params=[0.0, 0.5, 1.5], ids=["room-whole", "room-whole-from-half", "written-only"])
def read_route(request, monkeypatch):
    """The columns a step's attention reads: its whole key/value room from the first step on
    (the columns not yet written hold zeros and are closed), from when the written columns are
    half of it (the default), or only the columns written."""
    monkeypatch.setattr(llama_steps, "READ_WHOLE_FROM", request.param)
    return request.param


@pytest.mark.parametrize("build", SERVED.values(), ids=SERVED.keys())
def test_steps_give_the_modules_log_probs(build, attention_route, read_route):
    network = build()
    ids, mask = prompts(SMALL["vocab_size"])
    tokens = torch.randint(1, SMALL["vocab_size"], (6, 5))  # 3 completions per prompt
    ours = step_logits(network, ids, mask, 3, tokens)
    theirs = module_logits(network, ids, mask, 3, tokens)
    # the prompt's last logits predict token 0, and step t's token t + 1; the modules' do the
    # same at positions P - 1 and P + t
    assert ours.shape == (6, 6, SMALL["vocab_size"])
    assert (ours - theirs).abs().max() < 1e-5


def test_a_one_token_prompt_and_a_fully_padded_start_read_as_the_modules_do(read_route):
    network = small_llama()
    ids = torch.tensor([[7], [9]])
    tokens = torch.randint(1, SMALL["vocab_size"], (4, 3))
    ones = torch.ones_like(ids)
    ours = step_logits(network, ids, ones, 2, tokens)
    assert (ours - module_logits(network, ids, ones, 2, tokens)).abs().max() < 1e-5
    ids, mask = prompts(SMALL["vocab_size"])
    mask[1, :5], ids[1, :5] = 0, 0  # the second prompt is one real token after five pads
    ours = step_logits(network, ids, mask, 2, tokens)
    assert not ours.isnan().any()
    assert (ours - module_logits(network, ids, mask, 2, tokens)).abs().max() < 1e-5


def test_tiny_model_decodes_the_same_tokens_either_way(tiny_lm):
    modules, fused = decoded_both_ways(tiny_lm, LlamaSteps.of, Sampling(min_new_tokens=10), 10)
    assert modules.shape == (6, 10)
    assert torch.equal(modules, fused)


@pytest.mark.parametrize(
    "build",
    [
        lambda: small_llama().train(),
        lambda: small_llama().to(torch.float16),
        lambda: with_lora(small_llama(), use_dora=True),
        lambda: small_llama(rope_parameters={"rope_type": "linear", "factor": 2.0}),
        lambda: small_llama(hidden_act="gelu"),
    ],
    ids=["training", "float16", "dora", "scaled-rope", "gelu"],
)
def test_what_the_steps_do_not_serve_goes_through_the_modules(build):
    assert LlamaSteps.of(build(), rows=4) is None


def test_float32_weights_computing_in_bfloat16_go_through_the_modules():
    """Every weight trained: float32 master weights under bfloat16 autocast keep a float32
    residual stream in the modules, which the steps' products would not."""
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert LlamaSteps.of(small_llama(), rows=4) is None
    assert LlamaSteps.of(small_llama().to(torch.bfloat16), rows=4) is not None


def test_sampler_setting_turns_the_steps_off(tiny_lm, monkeypatch):
    built = []
    original = LlamaSteps.of
    monkeypatch.setattr(
        "src.model.fast.decoding.LlamaSteps.of", lambda *a: built.append(original(*a)) or built[-1]
    )
    HFSampler(max_completion_length=2, fused_steps=False).sample(tiny_lm, ["Hi"], 2)
    assert built == []
    HFSampler(max_completion_length=2).sample(tiny_lm, ["Hi", "Ho"], 2)
    assert len(built) == 1 and built[0].rows == 4
