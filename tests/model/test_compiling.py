"""`model.compile`: compiled log-prob forwards give the eager values and gradients, the frozen
reference compiles its own copy, and a machine without a C++ compiler gets a one-line error."""

import pytest
import torch
from hydra.utils import instantiate

from src.model import compiling
from src.model.causal_lm import CausalLM, load_causal_lm
from src.model.tiny import build_tiny_llama
from src.rollout.rollout import Rollout
from src.utils.errors import ConfigError


def test_compile_is_off_by_default_and_reaches_the_model(make_cfg):
    assert instantiate(make_cfg().model).compiled is False
    lm = instantiate(make_cfg("model.compile=true").model)
    assert lm.compiled is True and lm._compiled_forward is not None


def test_no_cpp_compiler_is_a_one_line_config_error(tiny_lm, monkeypatch):
    monkeypatch.delenv("CXX", raising=False)
    monkeypatch.setattr(compiling.shutil, "which", lambda name: None)
    monkeypatch.setattr(compiling.torch.cuda, "is_available", lambda: False)
    with pytest.raises(ConfigError, match=r"model\.compile=true needs a C\+\+ compiler") as error:
        CausalLM(tiny_lm.network, tiny_lm.tokenizer, compiled=True)
    assert "\n" not in str(error.value)


def rollout(lm: CausalLM) -> Rollout:
    """Two prompts of different lengths (left padding), four completions each."""
    batch = lm.encode_prompts(["What is 12 + 30?\nAnswer:", "Hi"])
    torch.manual_seed(0)
    completions = torch.randint(0, 250, (8, 10))
    mask = torch.ones_like(completions)
    mask[1, 6:] = 0  # a completion that ended early
    return Rollout(
        prompt_ids=batch["input_ids"].repeat_interleave(4, dim=0),
        prompt_mask=batch["attention_mask"].repeat_interleave(4, dim=0),
        completion_ids=completions,
        completion_mask=mask,
        is_clipped=torch.zeros(8, dtype=torch.bool),
        completions=[""] * 8,
    )


def scores_and_grads(lm: CausalLM, sequences: Rollout) -> tuple[torch.Tensor, dict]:
    lm.zero_grad()
    logps, _ = lm.log_probs(sequences)
    (logps * torch.linspace(-1, 1, logps.numel()).view_as(logps)).sum().backward()
    grads = {name: p.grad.clone() for name, p in lm.named_parameters() if p.grad is not None}
    lm.zero_grad()
    return logps.detach(), grads


@pytest.mark.slow
def test_compiled_log_probs_gradients_and_reference_match_eager(tmp_path):
    """A one-layer Llama (compiling time grows with layers), trained and reference log-probs."""
    folder = tmp_path / "one_layer"
    build_tiny_llama(folder, hidden_size=64, num_layers=1, num_heads=2, intermediate_size=128)
    eager = load_causal_lm(str(folder))
    compiled = CausalLM(eager.network, eager.tokenizer, compiled=True)
    sequences = rollout(eager)
    plain, plain_grads = scores_and_grads(eager, sequences)
    fast, fast_grads = scores_and_grads(compiled, sequences)
    assert torch.allclose(fast, plain, atol=1e-5, rtol=0)
    assert plain_grads.keys() == fast_grads.keys() and len(plain_grads) > 5
    for name, grad in plain_grads.items():
        assert (fast_grads[name] - grad).abs().max() <= 1e-4 * grad.abs().max(), name

    reference = compiled.frozen_reference()
    assert reference.compiled and reference._compiled_forward is not compiled._compiled_forward
    with torch.no_grad():  # the policy moves; the reference scores what the start scored
        for parameter in eager.network.parameters():
            parameter.add_(0.05)
        moved = eager.log_probs(sequences)[0]
        assert not torch.allclose(moved, plain, atol=1e-3)
        assert torch.allclose(reference.log_probs(sequences)[0], plain, atol=1e-5, rtol=0)
