"""Lean training forwards: the modules' values and gradients, fewer tensors kept for backward,
the rotary embedding in fewer operations, and the modules as they were outside the block."""

import importlib
import inspect

import pytest
import torch
from hydra.utils import instantiate

from src.model import lean_attention
from src.model.causal_lm import load_causal_lm
from src.model.hf_cache import CACHE
from src.model.lean import (
    LEAN_MLPS,
    LEAN_NORMS,
    RMSNormFunction,
    SiluGate,
    SiluGateDown,
    lean_layers,
)
from src.model.lean_attention import LEAN_ATTENTIONS, SignedSine, cache_keyword, fits
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
    """The lean attention calls the adapted projections as the module does."""
    lm = load_causal_lm(
        tiny_lm.network.name_or_path,
        lora={"r": 4, "lora_alpha": 8, "target_modules": ["q_proj", "k_proj", "v_proj", "o_proj"]},
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
        # 4 layers: an attention, an MLP and two norms each, and the final norm
        assert switched == 4 * 4 + 1
        with torch.no_grad():  # without gradients the MLPs' and norms' own forward runs
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


def test_the_attention_classes_still_do_what_the_lean_forward_does():
    """The lean attention repeats transformers' forward for these classes except the rotary
    embedding: the installed release's forward must be one it knows (each step it repeats
    there, in order, with the cache update of that release's keyword)."""
    from transformers.models.llama import modeling_llama

    assert {"LlamaAttention"} == LEAN_ATTENTIONS
    assert cache_keyword() == CACHE  # the keyword the model forward takes, too
    rotary = inspect.getsource(modeling_llama.apply_rotary_pos_emb)
    assert "q_embed = (q * cos) + (rotate_half(q) * sin)" in rotary
    assert "torch.cat((-x2, x1), dim=-1)" in inspect.getsource(modeling_llama.rotate_half)


def test_an_attention_forward_it_does_not_know_runs_as_it_is(tiny_lm, monkeypatch):
    """Code other than the repeated one (here: the cache update renamed) is not stood in for,
    and the log-probs are still the modules' own."""
    from transformers.models.llama import modeling_llama

    source = inspect.getsource(modeling_llama.LlamaAttention.forward)
    changed = source.replace(".update(key_states, value_states", ".store(key_states, value_states")
    monkeypatch.setattr(
        lean_attention.inspect,
        "getsource",
        lambda forward: changed if forward is modeling_llama.LlamaAttention.forward else "",
    )
    assert lean_attention.known_cache_keyword(modeling_llama.LlamaAttention.forward) is None
    monkeypatch.setattr(lean_attention, "cache_keyword", lambda: None)
    sequences = rollout(tiny_lm)
    with torch.no_grad():
        plain = tiny_lm.log_probs(sequences)[0]
    position_embeddings = (torch.zeros(1, 3, 32), torch.zeros(1, 3, 32))
    assert not lean_attention.fits(tiny_lm.network.model.layers[0].self_attn, position_embeddings)
    tiny_lm.lean_activations = False
    try:
        with torch.no_grad():
            assert torch.equal(plain, tiny_lm.log_probs(sequences)[0])
    finally:
        tiny_lm.lean_activations = True


def test_both_cache_keywords_continue_the_prompt(tiny_lm, monkeypatch):
    """Each release's keyword reaches the cache: a lean forward handed its cache by either
    name matches the module's own forward handed it by the installed name."""
    from transformers import DynamicCache

    attention = tiny_lm.network.model.layers[0].self_attn
    torch.manual_seed(0)
    hidden = torch.randn(2, 5, 128)
    cos, sin = tiny_lm.network.model.rotary_emb(hidden, torch.arange(5).expand(2, 5))
    earlier = torch.randn(2, 4, 3, 32), torch.randn(2, 4, 3, 32)

    def cache():
        made = DynamicCache()
        made.update(*earlier, 0)
        return made

    with torch.no_grad():
        own = type(attention).forward(attention, hidden, (cos, sin), None, **{CACHE: cache()})[0]
        for keyword in ("cache", "past_key_values"):
            monkeypatch.setattr(lean_attention, "cache_keyword", lambda keyword=keyword: keyword)
            lean = lean_attention.lean_attention_forward(
                attention, SignedSine(), hidden, (cos, sin), None, **{keyword: cache()}
            )[0]
            assert torch.equal(own, lean), keyword


def test_the_signed_sine_is_made_once_per_table():
    signed = SignedSine()
    sin = torch.arange(8.0).view(1, 2, 4)
    first = signed(sin)
    assert first.shape == (1, 2, 1, 4)
    assert first.flatten().tolist() == [-0.0, -1.0, 2.0, 3.0, -4.0, -5.0, 6.0, 7.0]
    assert signed(sin) is first  # the next layer of the same forward
    assert signed(sin.clone()) is not first  # the next forward's table
    signed.clear()
    assert signed._sin is None and signed._signed is None


def test_partial_rotary_tables_run_the_module_as_it_is(tiny_lm):
    attention = tiny_lm.network.model.layers[0].self_attn
    hidden, full, half = torch.randn(1, 3, 128), torch.ones(1, 3, 32), torch.ones(1, 3, 16)
    assert fits(attention, (full, full)) and not fits(attention, (half, half))
    with lean_layers(tiny_lm.network), pytest.raises(RuntimeError) as raised:
        # half the head's 32 dimensions: transformers' own rotary code meets the shapes
        attention(hidden_states=hidden, position_embeddings=(half, half))
    assert raised.traceback[-1].name == "apply_rotary_pos_emb"


def test_config_key_turns_it_off(make_cfg):
    assert instantiate(make_cfg().model).lean_activations is True
    lm = instantiate(make_cfg("model.lean_activations=false").model)
    with lm._lean() as switched:
        assert switched == 0
