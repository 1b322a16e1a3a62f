"""The conformance probes: with every fast path on, runs give the plain path's numbers; a fast
path planted wrong (as a transformers release once made one) is caught before first use,
warned about once, and the plain path runs instead."""

import logging

import pytest
import torch
from transformers.models.llama import modeling_llama

from src.model.fast import decoding, lean_layers, llama_steps, packed, probe
from src.model.fast.probe import TOLERANCE, network_kind, proven, verdicts
from src.model.hf_cache import CACHE
from src.rollout.hf import HFSampler
from tests.helpers.models import lora_lm, random_rollout

PROMPTS = ["What is 12 + 30?\nAnswer:", "Hi"]


def sample(lm, seed=3, **settings):
    torch.manual_seed(seed)
    sampler = HFSampler(max_completion_length=10, min_completion_length=10, **settings)
    return sampler.sample(lm, PROMPTS, 4).completion_ids


def plain_tokens(lm):
    return sample(lm, fused_steps=False, packed_weights=False)


def rollout(lm):
    return random_rollout(lm, PROMPTS, width=6)


def whole_sequence_log_probs(lm, sequences):
    """The plain path: every row's prompt and completion as one sequence, no cache."""
    ids = torch.cat([sequences.prompt_ids, sequences.completion_ids], dim=1)
    mask = torch.cat([sequences.prompt_mask, sequences.completion_mask], dim=1)
    with torch.no_grad():
        return lm.token_log_probs(ids, mask, sequences.completion_ids.size(1))[0]


def log_probs_and_grads(lm, sequences, lean):
    lm.lean_activations = lean
    try:
        logps, _ = lm.log_probs(sequences)
        weights = torch.linspace(-1, 1, logps.numel()).view_as(logps)
        trained = lm.trainable_parameters()
        grads = torch.autograd.grad((logps * weights).sum(), trained)
    finally:
        lm.lean_activations = True
    return logps.detach(), grads


def warnings_about(caplog, path):
    return [
        r
        for r in caplog.records
        if r.levelno == logging.WARNING and f"fast path {path} disagrees" in r.getMessage()
    ]


@pytest.mark.parametrize("adapter", [False, True], ids=["full", "lora"])
def test_every_fast_path_on_gives_the_plain_paths_tokens_and_log_probs(tiny_lm, adapter):
    lm = lora_lm(tiny_lm) if adapter else tiny_lm
    assert torch.equal(sample(lm), plain_tokens(lm))
    sequences = rollout(lm)
    with torch.no_grad():
        grouped = lm.log_probs(sequences)[0]
    assert (grouped - whole_sequence_log_probs(lm, sequences)).abs().max() < 1e-4
    plain, plain_grads = log_probs_and_grads(lm, sequences, lean=False)
    lean, lean_grads = log_probs_and_grads(lm, sequences, lean=True)
    assert torch.equal(plain, lean)
    for fast, slow in zip(lean_grads, plain_grads, strict=True):
        assert (fast - slow).abs().max() <= 1e-5 * slow.abs().max()
    paths = {v.path for v in verdicts() if v.proven}
    fused = "fused_steps+packed_weights" if packed.can_pack(8) else "fused_steps"
    assert {fused, "lean_layers", "shared_prompt"} <= paths
    assert all(v.proven for v in verdicts())


def test_an_attention_that_drops_the_cache_is_caught(tiny_lm, monkeypatch, caplog):
    """What transformers 5.24 did to a stand-in forward: the cache handed over under the
    installed keyword is not the one the attention takes, so continuations attend only to
    themselves. The shared prompt is caught and every row runs whole."""
    sequences = rollout(tiny_lm)
    expected = whole_sequence_log_probs(tiny_lm, sequences)
    own = modeling_llama.LlamaAttention.forward

    def forgetful(self, hidden_states, position_embeddings=None, attention_mask=None, **kw):
        kw.pop(CACHE, None)
        return own(self, hidden_states, position_embeddings, attention_mask, **kw)

    monkeypatch.setattr(modeling_llama.LlamaAttention, "forward", forgetful)
    with caplog.at_level(logging.INFO), torch.no_grad():
        logps = tiny_lm.log_probs(sequences)[0]
    assert len(warnings_about(caplog, "shared_prompt")) == 1
    assert (logps - expected).abs().max() < 1e-5
    (verdict,) = [v for v in verdicts() if v.path == "shared_prompt"]
    assert not verdict.proven and verdict.difference > verdict.tolerance
    with torch.no_grad():  # later calls run whole without probing again
        assert torch.equal(tiny_lm.log_probs(sequences)[0], logps)
    assert len(warnings_about(caplog, "shared_prompt")) == 1


@pytest.mark.parametrize("adapter", [False, True], ids=["full", "lora"])
def test_a_perturbed_fused_weight_is_caught(tiny_lm, monkeypatch, caplog, adapter):
    lm = lora_lm(tiny_lm) if adapter else tiny_lm
    expected = plain_tokens(lm)
    own = llama_steps.Product.__init__

    def perturbed(self, weight, bias, rows, pack):
        own(self, weight * 1.05, bias, rows, pack)

    monkeypatch.setattr(llama_steps.Product, "__init__", perturbed)
    with caplog.at_level(logging.INFO):
        tokens = sample(lm)
    assert warnings_about(caplog, "fused_steps")
    assert not any(v.proven for v in verdicts() if v.path.startswith("fused_steps"))
    assert torch.equal(tokens, expected)


def plant_wrong_packed_product(monkeypatch, factor):
    """The fused steps' packed products give `factor` times the right output."""
    own = packed.packed_product

    def wrong(weight, bias, rows, through_onednn):
        product = own(weight, bias, rows, through_onednn)
        return lambda x: product(x) * factor

    monkeypatch.setattr(llama_steps, "packed_product", wrong)


@pytest.mark.skipif(not packed.can_pack(8), reason="torch built without MKL")
def test_a_wrong_packed_product_is_caught_and_the_fused_step_runs_unpacked(
    tiny_lm, monkeypatch, caplog
):
    expected = plain_tokens(tiny_lm)
    plant_wrong_packed_product(monkeypatch, 1.05)
    with caplog.at_level(logging.INFO):
        tokens = sample(tiny_lm)
    assert warnings_about(caplog, "fused_steps+packed_weights")
    outcome = {v.path: v.proven for v in verdicts()}
    assert outcome["fused_steps+packed_weights"] is False and outcome["fused_steps"] is True
    assert torch.equal(tokens, expected)


def one_row(lm):
    """Decode one row: steps that nothing packs (a matrix-vector product packs nothing)."""
    torch.manual_seed(3)
    sampler = HFSampler(max_completion_length=4, min_completion_length=4)
    return sampler.sample(lm, PROMPTS[:1], 1).completion_ids


def counting_teacher_forcing(monkeypatch):
    calls = []
    own = decoding.teacher_forced_difference

    def counted(*args):
        calls.append(args)
        return own(*args)

    monkeypatch.setattr(decoding, "teacher_forced_difference", counted)
    return calls


@pytest.mark.skipif(not packed.can_pack(8), reason="torch built without MKL")
def test_proven_packed_steps_prove_the_unpacked_ones_without_a_probe(tiny_lm, monkeypatch):
    sample(tiny_lm)  # 8 rows: the packed steps, proven by teacher forcing
    calls = counting_teacher_forcing(monkeypatch)
    one_row(tiny_lm)
    assert calls == []
    by_path = {v.path: v for v in verdicts()}
    assert by_path["fused_steps"].proven and by_path["fused_steps"].seconds == 0.0
    assert by_path["fused_steps+packed_weights"].proven


@pytest.mark.skipif(not packed.can_pack(8), reason="torch built without MKL")
def test_after_proven_unpacked_steps_a_wrong_packed_product_is_still_caught(
    tiny_lm, monkeypatch, caplog
):
    """Packed steps after proven unpacked ones are checked product by product, not by teacher
    forcing again; a wrong packed product is caught there and the unpacked steps decode."""
    expected = plain_tokens(tiny_lm)
    one_row(tiny_lm)
    assert {v.path: v.proven for v in verdicts()}["fused_steps"] is True
    calls = counting_teacher_forcing(monkeypatch)
    plant_wrong_packed_product(monkeypatch, 1.01)
    with caplog.at_level(logging.INFO):
        tokens = sample(tiny_lm)
    assert calls == []
    assert warnings_about(caplog, "fused_steps+packed_weights")
    assert {v.path: v.proven for v in verdicts()}["fused_steps+packed_weights"] is False
    assert torch.equal(tokens, expected)


def test_a_wrong_lean_backward_is_caught(tiny_lm, monkeypatch, caplog):
    sequences = rollout(tiny_lm)
    plain, plain_grads = log_probs_and_grads(tiny_lm, sequences, lean=False)
    own = lean_layers.RMSNormFunction.backward

    def wrong(ctx, grad):
        grad_x, grad_weight, _ = own(ctx, grad)
        return grad_x * 1.1, grad_weight, None

    monkeypatch.setattr(lean_layers.RMSNormFunction, "backward", staticmethod(wrong))
    with caplog.at_level(logging.INFO):
        lean, lean_grads = log_probs_and_grads(tiny_lm, sequences, lean=True)
    assert len(warnings_about(caplog, "lean_layers")) == 1
    assert torch.equal(plain, lean)
    assert all(torch.equal(a, b) for a, b in zip(lean_grads, plain_grads, strict=True))


def test_a_fast_path_that_raises_is_left_out_with_its_error(tiny_lm, monkeypatch, caplog):
    expected = plain_tokens(tiny_lm)

    def broken(*args, **kwargs):
        raise TypeError("prefill() got an unexpected keyword argument 'cache'")

    monkeypatch.setattr(llama_steps.LlamaSteps, "prefill", broken)
    with caplog.at_level(logging.INFO):
        tokens = sample(tiny_lm)
    assert torch.equal(tokens, expected)
    failed = [v for v in verdicts() if v.path.startswith("fused_steps")]
    assert failed and all(v.error.startswith("TypeError") for v in failed)
    assert "unexpected keyword argument" in warnings_about(caplog, "fused_steps")[0].getMessage()


def test_each_path_is_probed_once_per_kind_of_network(tiny_lm, monkeypatch):
    checks = []
    own = lean_layers.check_lean_layers
    monkeypatch.setattr(lean_layers, "check_lean_layers", lambda n: checks.append(n) or own(n))
    sequences = rollout(tiny_lm)
    for _ in range(3):
        tiny_lm.log_probs(sequences)
    assert len(checks) == 1
    sample(tiny_lm)
    sample(tiny_lm)
    assert len({(v.path, v.network) for v in verdicts()}) == len(verdicts())


def test_the_probe_leaves_the_random_state_and_the_mode_alone(tiny_lm):
    network = tiny_lm.network.train()
    state = torch.get_rng_state()
    assert proven("shared_prompt", network, lambda: float(network.training))  # eval mode...
    assert proven("lean_layers", network, lambda: lean_layers.check_lean_layers(network))
    assert torch.equal(torch.get_rng_state(), state)
    assert network.training  # ...and the mode comes back


def test_a_difference_that_is_not_a_number_is_not_within_tolerance(tiny_lm, caplog):
    with caplog.at_level(logging.INFO):
        assert not proven("planted", tiny_lm.network, lambda: float("nan"))
    assert warnings_about(caplog, "planted")


def test_kinds_of_network_and_their_tolerances(tiny_lm):
    lm = lora_lm(tiny_lm)
    assert network_kind(tiny_lm.network) == "LlamaForCausalLM(128x4, float32, cpu)"
    assert network_kind(lm.network) == "LlamaForCausalLM(128x4, float32, cpu)+lora"
    assert probe.tolerance_of(tiny_lm.network) == TOLERANCE[torch.float32]


def test_the_environment_turns_paths_off_without_probing(tiny_lm, monkeypatch):
    monkeypatch.setenv("GRPO_FAST_PATHS_OFF", "fused_steps, cache_room")
    expected = plain_tokens(tiny_lm)
    checks = []
    assert not proven("fused_steps+packed_weights", tiny_lm.network, lambda: checks.append(1))
    assert torch.equal(sample(tiny_lm), expected)
    assert checks == []
    off = {v.path for v in verdicts() if v.error == "turned off"}
    assert off == {"fused_steps+packed_weights", "fused_steps", "cache_room"}
    monkeypatch.setenv("GRPO_FAST_PATHS_OFF", "all")
    assert not proven("lean_layers", tiny_lm.network, lambda: 0.0)


def test_a_name_that_is_no_fast_path_is_refused_in_one_line(monkeypatch, make_cfg):
    from src.runs.settings import check_settings
    from src.utils.errors import ConfigError

    monkeypatch.setenv("GRPO_FAST_PATHS_OFF", "fused_step")  # fused_steps, misspelt
    with pytest.raises(ConfigError) as caught:
        check_settings(make_cfg())  # before anything is loaded
    assert str(caught.value).startswith(
        "$GRPO_FAST_PATHS_OFF names 'fused_step', which is no fast path: name any of cache_room,"
    )
    monkeypatch.setenv("GRPO_FAST_PATHS_OFF", " fused_steps,all, ")
    assert probe.turned_off_names() == {"fused_steps", "all"}


def test_every_fast_path_the_code_proves_is_named_in_fast_paths():
    """A path's name in `proven`, `built`, `imply` or a `path = ...` of src/model/fast is one
    $GRPO_FAST_PATHS_OFF may name."""
    import re
    from pathlib import Path

    root = Path(probe.__file__).resolve().parents[1]
    pattern = re.compile(
        r'(?:proven|built|imply|proven_object)\(\s*"([a-z_+]+)"|(?:path|PATH) = "([a-z_+]+)"'
    )
    named = {
        part
        for source in root.rglob("*.py")
        for found in pattern.findall(source.read_text())
        for name in found
        if name
        for part in name.split("+")
    }
    assert {
        "fused_steps",
        "cache_room",
        "shared_prompt",
        "captured_steps",
        "onednn_products",
    } <= named
    assert named <= set(probe.FAST_PATHS)


def test_the_largest_difference_of_finite_and_not_finite_values():
    from src.model.fast.probe import largest_difference

    inf, nan = float("inf"), float("nan")
    assert largest_difference(torch.tensor([1.0, 2.0]), torch.tensor([1.5, 2.0])) == 0.5
    assert largest_difference(torch.tensor([inf, 2.0]), torch.tensor([inf, 2.25])) == 0.25
    assert largest_difference(torch.tensor([-inf, 2.0]), torch.tensor([-inf, 2.0])) == 0.0
    assert largest_difference(torch.tensor([inf, 2.0]), torch.tensor([-inf, 2.0])) == inf
    assert largest_difference(torch.tensor([nan, 1.0]), torch.tensor([nan, 1.0])) == inf
    assert largest_difference(torch.tensor([nan, 1.0]), torch.tensor([0.0, 1.0])) == inf
    assert largest_difference(torch.tensor([1.0]), torch.tensor([1.0, 1.0])) == inf
    assert largest_difference(torch.tensor([inf]), torch.tensor([inf])) == inf
    half = torch.tensor([1.0, 3.0], dtype=torch.bfloat16)
    assert largest_difference(half, torch.tensor([1.0, 2.0])) == 1.0


def test_a_path_is_never_proven_on_nan_output(tiny_lm, caplog):
    """Both sides NaN everywhere (a network that overflows in its precision) is no agreement:
    the path is refused with a warning, not proven with a difference of 0."""
    from src.model.fast import probe

    nan_logits = torch.full((2, 5), float("nan"))
    probe.forget_verdicts()
    try:
        with caplog.at_level("WARNING"):
            check = lambda: probe.log_softmax_difference(nan_logits, nan_logits.clone())  # noqa: E731
            assert not probe.proven("static_steps", tiny_lm.network, check)
        assert "static_steps disagrees" in caplog.text
        assert probe.standing("static_steps", tiny_lm.network).difference == float("inf")
    finally:
        probe.forget_verdicts()


def test_proven_object_builds_and_checks_under_one_guard(tiny_lm, caplog):
    """The object comes back only once built and proven; a build that raises or a check that
    refuses gives one warning and None, and nothing is built again on that kind of network."""
    network = tiny_lm.network
    made = probe.proven_object("test_good", network, lambda: "steps", lambda steps: 0.0)
    assert made == "steps"
    builds = []

    def broken() -> str:
        builds.append(1)
        raise AttributeError("'LlamaAttention' object has no attribute 'scaling'")

    with caplog.at_level(logging.WARNING):
        for _ in range(2):
            assert probe.proven_object("test_broken", network, broken, lambda s: 0.0) is None
    assert builds == [1]
    assert caplog.text.count("fast path test_broken could not be built") == 1
    wrong = probe.proven_object("test_wrong", network, lambda: "steps", lambda s: 1.0)
    assert wrong is None and not probe.standing("test_wrong", network).proven
    assert probe.proven_object("test_none", network, lambda: None, lambda s: 0.0) is None
