"""Lean training forwards: the modules' values and gradients, fewer tensors kept for backward,
and the modules as they were outside the block."""

import importlib
import inspect

import pytest
import torch
from hydra.utils import instantiate

from src.model.lean import (
    LEAN_MLPS,
    LEAN_NORMS,
    RMSNormFunction,
    SiluGate,
    SiluGateDown,
    lean_layers,
)
from src.rollout.rollout import Rollout


def double(*shape, grad=True):
    return torch.randn(*shape, dtype=torch.float64, requires_grad=grad)


@pytest.mark.parametrize("weight_grad", [True, False], ids=["trained", "frozen"])
def test_functions_pass_gradcheck(weight_grad):
    torch.manual_seed(0)
    gate, up = double(2, 3, 5), double(2, 3, 5)
    weight, bias = double(4, 5, grad=weight_grad), double(4, grad=weight_grad)
    assert torch.autograd.gradcheck(SiluGate.apply, (gate, up))
    assert torch.autograd.gradcheck(SiluGateDown.apply, (gate, up, weight, bias))
    assert torch.autograd.gradcheck(SiluGateDown.apply, (gate, up, weight, None))
    x, norm = double(2, 3, 5), double(5, grad=weight_grad)
    assert torch.autograd.gradcheck(lambda a, w: RMSNormFunction.apply(a, w, 1e-6), (x, norm))


def rollout(lm):
    batch = lm.encode_prompts(["What is 12 + 30?\nAnswer:", "Hi"])
    torch.manual_seed(0)
    completions = torch.randint(0, 250, (8, 12))
    return Rollout(
        prompt_ids=batch["input_ids"].repeat_interleave(4, dim=0),
        prompt_mask=batch["attention_mask"].repeat_interleave(4, dim=0),
        completion_ids=completions,
        completion_mask=torch.ones_like(completions),
        is_clipped=torch.zeros(8, dtype=torch.bool),
        completions=[""] * 8,
    )


def log_probs_and_grads(lm, sequences, lean):
    """Log-probs, gradients of a weighted sum of them, and the bytes autograd kept."""
    kept = {}

    def pack(tensor):
        kept[tensor.untyped_storage().data_ptr()] = tensor.untyped_storage().nbytes()
        return tensor

    lm.lean_activations = lean
    lm.zero_grad()
    try:
        with torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor):
            logps, _ = lm.log_probs(sequences)
        (logps * torch.linspace(-1, 1, logps.numel()).view_as(logps)).sum().backward()
    finally:
        lm.lean_activations = True
    grads = {name: p.grad.clone() for name, p in lm.named_parameters() if p.grad is not None}
    lm.zero_grad()
    return logps.detach(), grads, sum(kept.values())


def test_tiny_model_gives_the_same_log_probs_and_gradients_keeping_less(tiny_lm):
    sequences = rollout(tiny_lm)
    plain, plain_grads, plain_bytes = log_probs_and_grads(tiny_lm, sequences, lean=False)
    lean, lean_grads, lean_bytes = log_probs_and_grads(tiny_lm, sequences, lean=True)
    assert torch.equal(plain, lean)
    assert plain_grads.keys() == lean_grads.keys() and len(plain_grads) > 30
    for name, grad in plain_grads.items():  # float rounding: relative to the largest entry
        assert (lean_grads[name] - grad).abs().max() <= 1e-5 * grad.abs().max(), name
    assert lean_bytes < 0.8 * plain_bytes  # 10.2 against 13.2 MB
    assert not any("forward" in vars(module) for module in tiny_lm.network.modules())


def test_the_block_switches_known_modules_and_restores_them(tiny_lm):
    network = tiny_lm.network
    with lean_layers(network) as switched:
        # 4 layers: an MLP and two norms each, and the final norm
        assert switched == 4 * 3 + 1
        with torch.no_grad():  # without gradients the modules' own forward runs
            network(input_ids=torch.tensor([[1, 2, 3]]))
    assert not any("forward" in vars(module) for module in network.modules())
    with lean_layers(network, enabled=False) as switched:
        assert switched == 0


def test_checkpointed_networks_are_left_as_they_are(tiny_lm, monkeypatch):
    monkeypatch.setattr("src.model.causal_lm.checkpointed", lambda network: True)
    with tiny_lm._lean() as switched:
        assert switched == 0


def test_the_known_classes_still_compute_what_the_functions_do():
    """The lean forwards stand in for these classes' own: their code must stay the Llama
    one (a transformers release that changes it would otherwise be silently replaced)."""

    def body(name):
        family = name.removesuffix("MLP").removesuffix("RMSNorm").lower()
        module = importlib.import_module(f"transformers.models.{family}.modeling_{family}")
        return inspect.getsource(getattr(module, name).forward).split("\n", 1)[1]

    assert {body(name) for name in LEAN_MLPS} == {body("LlamaMLP")}
    assert {body(name) for name in LEAN_NORMS} == {body("LlamaRMSNorm")}
    assert "self.act_fn(self.gate_proj(x)) * self.up_proj(x)" in body("LlamaMLP")
    assert "torch.rsqrt(variance + self.variance_epsilon)" in body("LlamaRMSNorm")


def test_config_key_turns_it_off(make_cfg):
    assert instantiate(make_cfg().model).lean_activations is True
    lm = instantiate(make_cfg("model.lean_activations=false").model)
    with lm._lean() as switched:
        assert switched == 0
