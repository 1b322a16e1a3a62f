"""Lean training forwards: the modules' values and gradients, fewer tensors kept for backward,
and the modules as they were outside the block."""

import pytest
import torch
from hydra.utils import instantiate

from src.model.causal_lm import load_causal_lm
from src.model.fast.lean_layers import (
    GatedDown,
    GatedUp,
    GemmaNormFunction,
    RMSNormFunction,
    lean_layers,
)
from tests.helpers.models import random_rollout
from tests.helpers.small_gemma import build_small_gemma_folder


def double(*shape, grad=True):
    return torch.randn(*shape, dtype=torch.float64, requires_grad=grad)


@pytest.mark.parametrize("activation", ["silu", "gelu_tanh"])
@pytest.mark.parametrize("weight_grad", [True, False], ids=["trained", "frozen"])
def test_functions_pass_gradcheck(weight_grad, activation):
    torch.manual_seed(0)
    gate, up = double(2, 3, 5), double(2, 3, 5)
    weight, bias = double(4, 5, grad=weight_grad), double(4, grad=weight_grad)
    assert torch.autograd.gradcheck(lambda g, u: GatedUp.apply(g, u, activation), (gate, up))
    for b in (bias, None):
        assert torch.autograd.gradcheck(
            lambda g, u, w, b: GatedDown.apply(g, u, w, b, False, False, activation),
            (gate, up, weight, b),
        )
    x, norm = double(2, 3, 5), double(5, grad=weight_grad)
    assert torch.autograd.gradcheck(lambda a, w: RMSNormFunction.apply(a, w, 1e-6), (x, norm))
    assert torch.autograd.gradcheck(lambda a, w: GemmaNormFunction.apply(a, w, 1e-6), (x, norm))


def test_the_activations_are_the_modules_own():
    """Gemma's gate is GELU with the tanh approximation, not the exact GELU: the lean forward
    of a Gemma MLP gives its module's values bit for bit."""
    from transformers import Gemma3TextConfig
    from transformers.models.gemma3.modeling_gemma3 import Gemma3MLP, Gemma3RMSNorm

    from src.model.fast.lean_layers import _lean_forward

    torch.manual_seed(0)
    config = Gemma3TextConfig(hidden_size=8, intermediate_size=12)
    mlp, norm = Gemma3MLP(config), Gemma3RMSNorm(8)
    norm.weight.data.uniform_(-0.5, 0.5)
    x = torch.randn(2, 3, 8)
    for module in (mlp, norm):
        assert torch.equal(_lean_forward(module)(module, x), module(x))


def rollout(lm):
    return random_rollout(lm, ["What is 12 + 30?\nAnswer:", "Hi"], width=12)


def log_probs_and_grads(lm, sequences, lean):
    """Log-probs, gradients of a weighted sum of them, and the bytes autograd kept (the
    adapter's gradients only, under LoRA)."""
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


def test_lora_networks_give_the_same_log_probs_and_gradients(tiny_lm):
    """The lean MLPs call the adapted projections as the module does."""
    lm = load_causal_lm(
        tiny_lm.network.name_or_path,
        lora={
            "r": 4,
            "lora_alpha": 8,
            "target_modules": ["q_proj", "v_proj", "gate_proj", "down_proj"],
        },
    )
    torch.manual_seed(1)
    for name, parameter in lm.network.named_parameters():
        if "lora_B" in name:  # a moved adapter, so its products count
            parameter.data.normal_(std=0.02)
    sequences = rollout(lm)
    plain, plain_grads, _ = log_probs_and_grads(lm, sequences, lean=False)
    lean, lean_grads, _ = log_probs_and_grads(lm, sequences, lean=True)
    assert torch.equal(plain, lean)
    assert plain_grads.keys() == lean_grads.keys() and len(plain_grads) == 4 * 4 * 2
    for name, grad in plain_grads.items():
        assert (lean_grads[name] - grad).abs().max() <= 1e-5 * grad.abs().max(), name


@pytest.fixture(scope="module")
def gemma_lm(tmp_path_factory):
    """A small random Gemma 3 (tanh-GELU MLPs, (1 + w) norms, query and key norms) behind
    LoRA on every linear layer, with moved adapters."""
    folder = build_small_gemma_folder(tmp_path_factory.mktemp("models") / "small_gemma3")
    lm = load_causal_lm(str(folder), lora={"r": 4, "lora_alpha": 8, "target_modules": "all-linear"})
    torch.manual_seed(1)
    for name, parameter in lm.network.named_parameters():
        if "lora_B" in name:
            parameter.data.normal_(std=0.02)
    return lm


@pytest.mark.parametrize("trained", ["adapters", "all"])
def test_gemma_gives_the_same_log_probs_and_gradients_keeping_less(gemma_lm, trained):
    """Gemma 3's MLPs (tanh GELU) and all six norms of a layer (input, post-attention,
    pre- and post-MLP, query and key) are switched; values equal, gradients of the adapters
    and, with everything trained, of the norms' weights agree."""
    if trained == "all":
        for parameter in gemma_lm.network.parameters():
            parameter.requires_grad_(True)
    try:
        with lean_layers(gemma_lm.network) as switched:
            assert switched == 3 * (1 + 6) + 1  # 3 layers: an MLP and six norms; the final norm
        sequences = rollout(gemma_lm)
        plain, plain_grads, plain_bytes = log_probs_and_grads(gemma_lm, sequences, lean=False)
        lean, lean_grads, lean_bytes = log_probs_and_grads(gemma_lm, sequences, lean=True)
    finally:
        for name, parameter in gemma_lm.network.named_parameters():
            parameter.requires_grad_("lora_" in name)
    assert torch.equal(plain, lean)
    assert plain_grads.keys() == lean_grads.keys()
    assert any("norm" in name for name in plain_grads) == (trained == "all")
    for name, grad in plain_grads.items():
        assert (lean_grads[name] - grad).abs().max() <= 1e-5 * grad.abs().max(), name
    assert lean_bytes < 0.95 * plain_bytes


def test_reference_scores_without_gradients_are_the_modules_own(tiny_lm):
    sequences = rollout(tiny_lm)
    scores = {}
    for lean in (False, True):
        tiny_lm.lean_activations = lean
        try:
            with torch.no_grad():
                scores[lean] = tiny_lm.log_probs(sequences, with_entropy=True)
        finally:
            tiny_lm.lean_activations = True
    assert torch.equal(scores[False][0], scores[True][0])
    assert torch.equal(scores[False][1], scores[True][1])


def test_the_block_switches_known_modules_and_restores_them(tiny_lm):
    network = tiny_lm.network
    with lean_layers(network) as switched:
        # 4 layers: an MLP and two norms each, and the final norm
        assert switched == 4 * 3 + 1
        with torch.no_grad():  # without gradients the MLPs' and norms' own forward runs
            network(input_ids=torch.tensor([[1, 2, 3]]))
    assert not any("forward" in vars(module) for module in network.modules())
    with lean_layers(network, enabled=False) as switched:
        assert switched == 0
    with torch.no_grad(), lean_layers(network) as switched:
        assert switched == 0  # nothing to keep for backward: nothing switched


def test_checkpointed_networks_are_left_as_they_are(tiny_lm, monkeypatch):
    monkeypatch.setattr("src.model.causal_lm.checkpointed", lambda network: True)
    with tiny_lm._lean() as switched:
        assert switched == 0


def test_config_key_turns_it_off(make_cfg):
    assert instantiate(make_cfg().model).lean_activations is True
    lm = instantiate(make_cfg("model.lean_activations=false").model)
    with lm._lean() as switched:
        assert switched == 0
