"""On a CUDA GPU: the decoding step replayed as a CUDA graph gives the modules' logits and the
same tokens as `ModuleSteps`, a wrong step is turned away by the probe, and the chunked head
scores bf16 networks as their full logits do. Skipped without a GPU."""

import pytest
import torch

from src.model.fast.captured_steps import CapturedSteps
from src.model.fast.chunked_head import check_chunked_head
from src.model.fast.decoding import decoding_steps
from src.model.fast.probe import forget_verdicts, standing
from src.model.fast.static_steps import StaticSteps
from src.model.steps import ModuleSteps
from src.rollout.decode import Ending, Sampling, decode
from tests.helpers.small_llama import (
    SMALL,
    module_logits,
    prompts,
    small_llama,
    stepped_logits,
    with_lora,
)

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device"),
]


def on_gpu(network, dtype=torch.float32):
    return network.to(device="cuda", dtype=dtype)


def captured_logits(network, ids, mask, group_size, tokens):
    """`stepped_logits` through `CapturedSteps`, every step after the first a replay."""
    steps = CapturedSteps(StaticSteps.of(network, ids.size(0) * group_size))
    found = stepped_logits(steps, ids, mask, group_size, tokens)
    assert steps.graph is not None  # every step after the first was a replay
    return found


@pytest.mark.parametrize(
    ("dtype", "tolerance"), [(torch.float32, 1e-3), (torch.bfloat16, 5e-2)], ids=["fp32", "bf16"]
)
@pytest.mark.parametrize("adapter", [False, True], ids=["plain", "lora"])
def test_replayed_steps_give_the_modules_log_probs(dtype, tolerance, adapter):
    network = with_lora(small_llama()) if adapter else small_llama()
    network = on_gpu(network, dtype)
    ids, mask = (t.cuda() for t in prompts(SMALL["vocab_size"]))
    tokens = torch.randint(1, SMALL["vocab_size"], (6, 6), device="cuda")
    ours = captured_logits(network, ids, mask, 3, tokens)
    theirs = module_logits(network, ids, mask, 3, tokens)
    assert (ours - theirs).abs().max() < tolerance


def test_replayed_steps_decode_the_modules_tokens():
    network = on_gpu(small_llama())
    ids, mask = (t.cuda() for t in prompts(SMALL["vocab_size"]))
    runs = []
    for steps in (ModuleSteps(network), CapturedSteps(StaticSteps.of(network, 6))):
        torch.manual_seed(3)
        runs.append(
            decode(steps, ids, mask, 3, Sampling(min_new_tokens=20), Ending(20, [1], 0)).tokens
        )
    assert runs[0].shape == (6, 20)
    assert torch.equal(runs[0], runs[1])


def test_the_probe_proves_the_graph_and_turns_a_wrong_step_away(monkeypatch):
    forget_verdicts()
    network = on_gpu(small_llama())
    with decoding_steps(network, 4) as steps:
        assert isinstance(steps, CapturedSteps)
    assert standing("captured_steps", network).proven
    forget_verdicts()
    right = StaticSteps._last_hidden
    monkeypatch.setattr(StaticSteps, "_last_hidden", lambda self, t, p: right(self, t, p) * 1.05)
    with decoding_steps(network, 4) as steps:
        assert not isinstance(steps, CapturedSteps)
    assert not standing("captured_steps", network).proven
    forget_verdicts()


def test_the_chunked_head_scores_bf16_networks_as_their_logits():
    network = on_gpu(small_llama(), torch.bfloat16)
    assert check_chunked_head(network) < 5e-2
