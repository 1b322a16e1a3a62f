"""Half precision: what is stored and computed in it, the check that a network gives numbers in
it, the per-machine choice of bfloat16, and the fast decoding steps proven in it."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
import torch
from transformers.models.llama import modeling_llama

from src.model import precision
from src.model.fast import decoding, half_rounding, llama_steps
from src.model.fast.continued_prefill import continued_tolerance
from src.model.fast.decoding import decoding_steps, decoding_tolerance
from src.model.fast.half_rounding import FLOAT32_FACTOR, HALF_FACTOR, HALF_FLOOR
from src.model.fast.llama_steps import LlamaSteps
from src.model.fast.probe import forget_verdicts, standing
from src.model.fast.shared_prompt import check_shared_prompt, shared_tolerance
from src.model.hf_cache import CACHE
from src.model.precision import (
    check_finite_forward,
    computing,
    resolved_dtype,
    stored_dtype,
)
from src.utils.errors import ConfigError
from tests.helpers.small_gemma import small_gemma
from tests.helpers.small_llama import small_llama, with_lora


@pytest.fixture(autouse=True)
def fresh_verdicts():
    forget_verdicts()
    yield
    forget_verdicts()


def test_trained_weights_stay_float32_and_frozen_ones_take_the_half_type():
    assert stored_dtype("bfloat16", trains_every_weight=True) == torch.float32
    assert stored_dtype("bfloat16", trains_every_weight=False) == torch.bfloat16
    assert stored_dtype("bfloat16", trains_every_weight=True, device="cuda") == torch.bfloat16
    assert stored_dtype("float32", trains_every_weight=False) == torch.float32


def test_computing_turns_autocast_on_for_half_types_only():
    cpu = torch.device("cpu")
    x, w = torch.randn(2, 4), torch.randn(3, 4)
    with computing(torch.bfloat16, cpu):
        assert torch.nn.functional.linear(x, w).dtype == torch.bfloat16
    with computing(torch.float32, cpu):
        assert torch.nn.functional.linear(x, w).dtype == torch.float32


def test_a_network_giving_nan_logits_is_refused_in_one_line_naming_model_dtype():
    network = small_llama().train()
    check_finite_forward(network, "float32", "small")  # finite: nothing said
    with torch.no_grad():
        network.model.layers[0].mlp.down_proj.weight.fill_(float("nan"))
    with pytest.raises(ConfigError) as caught:
        check_finite_forward(network, "float16", "small")
    message = str(caught.value)
    assert "\n" not in message
    assert message.startswith("model.dtype=float16: small gives NaN or infinite logits")
    assert "float32" in message and "bfloat16" in message
    assert network.training  # the check leaves the network as it found it


def test_load_refuses_a_network_that_overflows_before_anything_trains(tmp_path, monkeypatch):
    from src.model import causal_lm
    from src.model.tiny import build_tiny_llama

    folder = tmp_path / "tiny"
    build_tiny_llama(str(folder), hidden_size=32, num_layers=1, num_heads=2, intermediate_size=64)
    loaded = causal_lm.AutoModelForCausalLM.from_pretrained

    def overflowing(*args, **kwargs):
        network = loaded(*args, **kwargs)
        with torch.no_grad():
            network.lm_head.weight.fill_(float("inf"))
        return network

    monkeypatch.setattr(causal_lm.AutoModelForCausalLM, "from_pretrained", overflowing)
    with pytest.raises(ConfigError, match=r"^model\.dtype=float16: .* gives NaN or infinite"):
        causal_lm.load_causal_lm(str(folder), dtype="float16")


def cpuinfo(tmp_path: Path, flags: str) -> Path:
    path = tmp_path / "cpuinfo"
    path.write_text(f"processor\t: 0\nflags\t\t: fpu sse avx2 {flags}\n")
    return path


def test_a_processor_without_bfloat16_units_stays_in_float32_and_says_so(
    tmp_path, monkeypatch, caplog
):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    timed = []
    monkeypatch.setattr(precision.per_machine, "measured_once", lambda *a: timed.append(a))
    with caplog.at_level(logging.INFO, logger="src.model.precision"):
        assert resolved_dtype("bfloat16_if_fast", cpuinfo(tmp_path, "avx512f")) == "float32"
    assert "no native bfloat16 units" in caplog.text
    assert timed == []  # nothing timed where there is nothing to gain
    recorded = precision.per_machine.choices()[precision.CHOICE]
    assert recorded["value"] is False and "no bfloat16 units" in recorded["source"]


@pytest.mark.parametrize("faster", [True, False])
def test_a_processor_with_bfloat16_units_takes_it_where_the_timing_says(
    tmp_path, monkeypatch, caplog, faster
):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    asked = []

    def measured_once(name, measure):
        asked.append(name)
        return faster

    monkeypatch.setattr(precision.per_machine, "measured_once", measured_once)
    with caplog.at_level(logging.INFO, logger="src.model.precision"):
        chosen = resolved_dtype("bfloat16_if_fast", cpuinfo(tmp_path, "avx512_bf16"))
    assert chosen == ("bfloat16" if faster else "float32")
    assert asked == [precision.CHOICE]
    assert f"model.dtype=bfloat16_if_fast: {chosen}" in caplog.text
    assert resolved_dtype("bfloat16", cpuinfo(tmp_path, "")) == "bfloat16"  # forced: as named


def test_the_timing_compares_both_types_and_returns_a_verdict(monkeypatch):
    monkeypatch.setattr(precision, "TIMED_SHAPES", ((4, 32, 64),))
    monkeypatch.setattr(precision, "ROUNDS", 3)
    verdict = precision.timed_bfloat16()
    assert isinstance(verdict.value, bool)
    assert set(verdict.timings) == {"float32", "bfloat16"}


def half_network(family: str) -> torch.nn.Module:
    """A small network as a LoRA run stores it in bfloat16: the frozen base in bfloat16, the
    adapters float32."""
    base = small_llama() if family == "llama" else small_gemma()
    network = with_lora(base.to(torch.bfloat16))
    for name, parameter in network.named_parameters():
        if "lora_" in name:
            parameter.data = parameter.data.float()
    return network.eval()


@pytest.mark.parametrize("family", ["llama", "gemma"])
def test_bfloat16_fused_steps_are_proven_against_the_bfloat16_modules(family):
    network = half_network(family)
    with computing(torch.bfloat16, torch.device("cpu")):
        with decoding_steps(network, rows=4, packed=False) as steps:
            assert isinstance(steps, LlamaSteps)
        verdict = standing("fused_steps", network)
    assert verdict.proven and "bfloat16" in verdict.network
    assert verdict.tolerance == HALF_FLOOR  # this network's own rounding moves it far less
    assert verdict.difference < verdict.tolerance


def test_the_decoding_tolerance_in_a_half_type_is_measured_on_the_modules(monkeypatch):
    """The largest of HALF_FACTOR times what the modules' own cached decoding differs from
    their forward by, FLOAT32_FACTOR times what the half type moves their forward from
    float32's, and HALF_FLOOR; none in float32 (the probe's fixed tolerance)."""
    network = half_network("llama")
    assert decoding_tolerance(small_llama(), rows=4) is None
    cases = [  # (own reordering, float32's distance, tolerance)
        (0.05, 0.01, HALF_FACTOR * 0.05),
        (0.0, 0.1, FLOAT32_FACTOR * 0.1),  # the modules agree with themselves: float32 rules
        (0.0, 0.0, HALF_FLOOR),
    ]
    for own, wide, expected in cases:
        forget_verdicts()
        monkeypatch.setattr(decoding, "teacher_forced_difference", lambda *a, v=own: v)
        monkeypatch.setattr(half_rounding, "float32_rounding", lambda *a, v=wide: v)
        with computing(torch.bfloat16, torch.device("cpu")):
            tolerance = decoding_tolerance(network, rows=4)
            assert tolerance is not None and tolerance() == pytest.approx(expected)


def test_the_float32_yardstick_measures_the_half_types_rounding_on_the_same_weights(caplog):
    """In bfloat16 the forward moves from its float32 values by more than nothing and far less
    than a nat; computing in float32 it does not move; weights too large to widen give no
    yardstick (0.0), said in one line."""
    network = half_network("gemma")
    forward, compared = decoding.plain_probe(network, rows=4)
    with computing(torch.bfloat16, torch.device("cpu"), network):
        moved = half_rounding.float32_rounding(network, forward, compared)
    assert 0.0 < moved < 0.5
    assert half_rounding.float32_rounding(small_llama(), forward, compared) == 0.0
    with caplog.at_level(logging.INFO), pytest.MonkeyPatch.context() as patch:
        patch.setattr(half_rounding, "WIDENED_LIMIT", 0)
        with computing(torch.bfloat16, torch.device("cpu"), network):
            assert half_rounding.float32_rounding(network, forward, compared) == 0.0
    assert "No float32 yardstick" in caplog.text


def test_the_continued_prefill_tolerance_is_measured_in_a_half_type_only():
    network = half_network("gemma")
    assert continued_tolerance(lambda rows: None, small_gemma()) is None
    with computing(torch.bfloat16, torch.device("cpu"), network):
        steps = LlamaSteps.of(network, 4, False)
        tolerance = continued_tolerance(steps.remade, network)
        assert tolerance is not None and tolerance() >= HALF_FLOOR


@pytest.mark.parametrize("part", ["post_mlp", "norm_in"])
def test_a_planted_error_in_the_bfloat16_steps_is_caught(part, monkeypatch, caplog):
    parts = llama_steps._gemma_parts

    def wrong(base, rows, kernels):
        found = parts(base, rows, kernels)
        for layer in found.layers:
            if part == "norm_in":  # the weight before attention applied twice
                layer.norm_in = layer.norm_in * layer.norm_in
            else:
                layer.post_mlp = None
        return found

    monkeypatch.setattr(llama_steps, "_gemma_parts", wrong)
    network = half_network("gemma")
    with (
        caplog.at_level(logging.WARNING),
        computing(torch.bfloat16, torch.device("cpu")),
        decoding_steps(network, rows=4, packed=False) as steps,
    ):
        assert not isinstance(steps, LlamaSteps)
    assert "fused_steps disagrees" in caplog.text


def test_the_adapters_read_their_input_as_it_is_with_the_same_numbers():
    """Under `computing` with the network, peft's LoRA layers skip widening their input to the
    float32 adapters' type (autocast narrows it again for the product): the logits are the
    same, and the layers cast again once the block ends."""
    network = half_network("llama")
    ids = torch.tensor([[1, 5, 9, 13, 17]])
    cpu = torch.device("cpu")
    with torch.no_grad():
        with computing(torch.bfloat16, cpu):
            widened = network(input_ids=ids).logits
        with computing(torch.bfloat16, cpu, network):
            layers = [m for m in network.modules() if hasattr(m, "cast_input_dtype_enabled")]
            assert layers and not any(m.cast_input_dtype_enabled for m in layers)
            as_is = network(input_ids=ids).logits
    assert torch.equal(as_is, widened)
    assert all(m.cast_input_dtype_enabled for m in layers)


@pytest.mark.slow
def test_a_bfloat16_lora_run_proves_its_passes_and_keeps_what_trains_in_float32(tmp_path):
    """`model.dtype=bfloat16` over LoRA: the base stored in bfloat16, the adapters float32;
    sampling, the shared-prompt log-prob pass and the lean layers are proven against the
    bfloat16 modules; log-probs come out float32, gradients reach the float32 adapters, and
    the sampler's log-probs lie within the half type's rounding of the trainer's."""
    from src.model.causal_lm import load_causal_lm
    from src.model.tiny import build_tiny_llama
    from src.rollout.hf import HFSampler

    folder = tmp_path / "tiny"
    build_tiny_llama(str(folder), hidden_size=32, num_layers=2, num_heads=2, intermediate_size=64)
    lora = {"r": 4, "lora_alpha": 8, "lora_dropout": 0.0, "target_modules": "all-linear"}
    lm = load_causal_lm(str(folder), dtype="bfloat16", lora=lora)
    assert lm.compute_dtype == torch.bfloat16
    assert lm.network.get_input_embeddings().weight.dtype == torch.bfloat16
    assert {p.dtype for p in lm.trainable_parameters()} == {torch.float32}
    torch.manual_seed(0)
    rollout = HFSampler(max_completion_length=6).sample(lm, ["12+3=", "4+5="], 4)
    logps, _ = lm.log_probs(rollout)
    assert logps.dtype == torch.float32
    logps.sum().backward()
    assert all(
        p.grad is not None and p.grad.dtype == torch.float32 for p in lm.trainable_parameters()
    )
    for path in ("fused_steps", "shared_prompt", "lean_layers"):
        verdict = standing(path, lm.network)
        assert verdict is not None and verdict.proven, path
        assert "bfloat16" in verdict.network
    written = rollout.completion_mask.bool()
    gap = (logps.detach() - rollout.sampler_logps)[written].abs()
    assert 0 < float(gap.max()) < 0.5  # bfloat16 rounds otherwise in each; never far


def test_float32_weights_computing_in_bfloat16_decode_through_the_modules_unpacked():
    """Every weight trained (float32 master weights under bfloat16 autocast): neither the
    fused steps nor MKL's packed float32 products, which would leave bfloat16, serve."""
    network = small_llama()
    with computing(torch.bfloat16, torch.device("cpu")):
        with decoding_steps(network, rows=4) as steps:
            assert not isinstance(steps, LlamaSteps)
        assert standing("packed_weights", network) is None
    with decoding_steps(network, rows=4) as steps:  # in float32 both serve again
        assert isinstance(steps, LlamaSteps)


def test_the_finite_check_reads_the_bos_a_prompt_starts_with():
    """Gemma 3's activations overflow float16 on its BOS only: the check's tokens start
    with the model's BOS, so a network that fails there alone is refused."""
    network = small_llama(bos_token_id=3)
    check_finite_forward(network, "float32", "small")
    with torch.no_grad():
        network.get_input_embeddings().weight[3].fill_(float("inf"))
    with pytest.raises(ConfigError, match="gives NaN or infinite logits"):
        check_finite_forward(network, "float16", "small")


def test_the_shared_prompt_in_a_half_type_is_held_to_float32s_distance_and_a_lost_cache_refused(
    monkeypatch,
):
    """In bfloat16 the cached prompt and the whole sequences order the same arithmetic
    otherwise: held to FLOAT32_FACTOR times float32's distance (at least HALF_FLOOR), under
    which the right cache passes; continuations that attend only to themselves (the cache
    dropped, as a transformers release once did) are still refused. Float32: the fixed one."""
    assert shared_tolerance(small_llama()) is None
    network = half_network("llama")
    keep = lambda count: {"logits_to_keep": count}  # noqa: E731
    own = modeling_llama.LlamaAttention.forward

    def forgetful(self, hidden_states, position_embeddings=None, attention_mask=None, **kw):
        kw.pop(CACHE, None)
        return own(self, hidden_states, position_embeddings, attention_mask, **kw)

    forget_verdicts()
    with computing(torch.bfloat16, torch.device("cpu"), network):
        tolerance = shared_tolerance(network)()
        assert tolerance >= HALF_FLOOR
        assert check_shared_prompt(network, keep) <= tolerance
        monkeypatch.setattr(modeling_llama.LlamaAttention, "forward", forgetful)
        assert check_shared_prompt(network, keep) > tolerance
    forget_verdicts()
