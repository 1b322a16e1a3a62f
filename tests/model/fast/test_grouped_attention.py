"""The grouped attention of the log-prob passes: SDPA's outputs and gradients for grouped and
plain heads, padding queries and float masks; what it does not compute goes to SDPA; a network
takes it only inside the block and once proven, and a planted wrong one is caught."""

import logging

import pytest
import torch

from src.model.fast import grouped_attention as ga
from src.model.fast import half_rounding
from src.model.fast.half_rounding import FLOAT32_FACTOR
from src.model.fast.probe import forget_verdicts, probe_forward, standing
from src.model.precision import computing
from tests.helpers.models import lora_lm, random_rollout
from tests.helpers.small_gemma import small_gemma

PROMPTS = ["What is 12 + 30?\nAnswer:", "Hi"]


def inputs(heads, kv_heads, dtype=torch.float32, queries=5, keys=7):
    generator = torch.Generator().manual_seed(0)
    query = torch.randn(2, heads, queries, 16, generator=generator)
    key = torch.randn(2, kv_heads, keys, 16, generator=generator)
    value = torch.randn(2, kv_heads, keys, 16, generator=generator)
    mask = torch.ones(2, 1, queries, keys, dtype=torch.bool).tril(diagonal=keys - queries)
    mask[1, :, :, :3] = False  # the second row left-padded by 3 ...
    mask[1, :, 0] = False  # ... its first query reads no key
    return [t.to(dtype) for t in (query, key, value)], mask


def both_ways(heads, kv_heads, mask_of=lambda m: m, dtype=torch.float32):
    given, mask = inputs(heads, kv_heads, dtype)
    module = ga._Grouped(heads // kv_heads)
    grad = torch.randn(2, 5, heads, 16, generator=torch.Generator().manual_seed(1)).to(dtype)
    results = []
    for run in (ga._plain(), ga.grouped_attention_forward):
        leaves = [t.clone().requires_grad_() for t in given]
        out, weights = run(module, *leaves, mask_of(mask), 0.0, 0.3)
        assert weights is None
        results.append([out.detach(), *torch.autograd.grad(out, leaves, grad)])
    return results


@pytest.mark.parametrize(("heads", "kv_heads"), [(4, 1), (4, 2), (4, 4)])
def test_outputs_and_gradients_equal_sdpas(heads, kv_heads):
    theirs, ours = both_ways(heads, kv_heads)
    assert ours[0].shape == (2, 5, heads, 16)  # transformers' layout: [B, Q, H, D]
    for mine, sdpa in zip(ours, theirs, strict=True):
        assert (mine - sdpa).abs().max() <= 1e-5 * sdpa.abs().max()
    assert torch.equal(ours[0][1, 0], torch.zeros(heads, 16))  # reads no key: 0, as SDPA


def test_bfloat16_stays_within_its_rounding_of_sdpa():
    theirs, ours = both_ways(4, 1, dtype=torch.bfloat16)
    for mine, sdpa in zip(ours, theirs, strict=True):
        assert mine.dtype == torch.bfloat16
        assert (mine.float() - sdpa.float()).abs().max() <= 2e-2 * sdpa.float().abs().max()


@pytest.mark.parametrize(
    "refused",
    ["no mask", "float mask", "dropout", "softcap", "position bias", "too many scores"],
)
def test_what_it_does_not_compute_goes_to_sdpa(refused, monkeypatch):
    (query, key, value), mask = inputs(4, 2)
    calls = []
    monkeypatch.setattr(ga, "_plain", lambda: lambda *a, **k: calls.append(a) or ("sdpa", None))
    monkeypatch.setattr(ga, "attention", lambda *a: pytest.fail("computed here"))
    arguments = {"attention_mask": mask, "dropout": 0.0}
    if refused == "no mask":
        arguments["attention_mask"] = None
    elif refused == "float mask":
        arguments["attention_mask"] = torch.zeros(mask.shape).masked_fill(~mask, -1e9)
    elif refused == "dropout":
        arguments["dropout"] = 0.1
    elif refused == "softcap":
        arguments["softcap"] = 50.0
    elif refused == "position bias":
        arguments["position_bias"] = torch.zeros(1, 4, 5, 7)
    else:
        monkeypatch.setattr(ga, "MOST_SCORES", 2 * 4 * 5 * 7 - 1)
    assert ga.grouped_attention_forward(ga._Grouped(2), query, key, value, **arguments)[0] == "sdpa"
    assert len(calls) == 1


def log_probs_and_grads(lm, sequences):
    logps, _ = lm.log_probs(sequences)
    weights = torch.linspace(-1, 1, logps.numel()).view_as(logps)
    grads = torch.autograd.grad((logps * weights).sum(), lm.trainable_parameters())
    return logps.detach(), grads


def test_the_passes_take_it_once_proven_and_give_sdpas_log_probs_and_gradients(
    tiny_lm, monkeypatch
):
    forget_verdicts()
    lm = lora_lm(tiny_lm)
    sequences = random_rollout(lm, PROMPTS, width=6)
    used = []
    own = ga.attention
    monkeypatch.setattr(ga, "attention", lambda *a: used.append(1) or own(*a))
    fast, fast_grads = log_probs_and_grads(lm, sequences)
    assert used and standing(ga.PATH, lm.network).proven
    assert lm.network.get_base_model().config._attn_implementation == ga.PLAIN  # restored
    monkeypatch.setenv("GRPO_FAST_PATHS_OFF", ga.PATH)
    forget_verdicts()
    used.clear()
    plain, plain_grads = log_probs_and_grads(lm, sequences)
    assert not used
    assert (fast - plain).abs().max() <= 1e-4
    for ours, theirs in zip(fast_grads, plain_grads, strict=True):
        assert (ours - theirs).abs().max() <= 1e-4 * theirs.abs().max()
    forget_verdicts()


@pytest.mark.parametrize("wrong", ["output", "padding"])
def test_a_planted_wrong_attention_is_caught_and_sdpa_runs(wrong, tiny_lm, monkeypatch, caplog):
    """A slightly wrong product, or padding keys read, is refused on the probe: one warning,
    and the passes give the plain path's numbers."""
    forget_verdicts()
    sequences = random_rollout(tiny_lm, PROMPTS, width=6)
    monkeypatch.setenv("GRPO_FAST_PATHS_OFF", ga.PATH)
    plain, _ = tiny_lm.log_probs(sequences)
    monkeypatch.delenv("GRPO_FAST_PATHS_OFF")
    forget_verdicts()
    own = ga.attention

    def planted(query, key, value, mask, scale):
        if wrong == "output":
            return own(query, key, value, mask, scale) * 1.01
        return own(query, key, value, torch.ones_like(mask), scale)

    monkeypatch.setattr(ga, "attention", planted)
    with caplog.at_level(logging.WARNING):
        fast, _ = tiny_lm.log_probs(sequences)
    warned = [r for r in caplog.records if f"fast path {ga.PATH} disagrees" in r.getMessage()]
    assert len(warned) == 1
    assert standing(ga.PATH, tiny_lm.network).proven is False
    assert torch.equal(fast, plain)
    forget_verdicts()


def test_gemma_sliding_windows_read_as_through_sdpa():
    """The probe batch is longer than the small Gemma 3's window: its sliding layers' masks
    come through as `sdpa` makes them."""
    assert ga.check_grouped_attention(small_gemma()) <= 1e-4


def test_a_half_type_is_held_to_what_its_own_rounding_moves():
    """In float64 the probe's fixed tolerance; in bfloat16 one measured on the network, at
    least `HALF_FLOOR`, under which the right attention is proven on a small Gemma 3."""
    forget_verdicts()
    assert ga.tolerance(small_gemma().double(), lambda: 0.0) is None
    half = small_gemma().to(torch.bfloat16)
    with computing(torch.bfloat16, torch.device("cpu"), half):
        measured = ga.tolerance(half, lambda: 0.0)()
        difference = ga.check_grouped_attention(half)
    assert measured >= ga.HALF_FLOOR
    assert difference <= measured
    forget_verdicts()


def test_float32_is_held_to_the_fixed_tolerance_or_to_what_float32_moves_from_float64(
    monkeypatch,
):
    """Within the probe's thousandth, nothing is widened; past it, the tolerance is
    FLOAT32_FACTOR times what float32 moves the plain modules from float64, where that is
    more than the thousandth (the CPU flash kernel's own error on a deep network)."""
    network = small_gemma()
    widened = []
    monkeypatch.setattr(half_rounding, "float64_rounding", lambda *a: widened.append(a) or moved[0])
    cases = [  # (the check's difference, float32's distance from float64, tolerance)
        (5e-4, 1.0, 1e-3),  # within the fixed tolerance: float64 never computed
        (2e-3, 1e-4, 1e-3),  # float32 itself near exact: the fixed tolerance refuses
        (2e-3, 8e-4, FLOAT32_FACTOR * 8e-4),
    ]
    for difference, distance, expected in cases:
        forget_verdicts()
        moved = [distance]
        tolerance = ga.tolerance(network, lambda d=difference: d)
        assert tolerance is not None and tolerance() == pytest.approx(expected)
    assert len(widened) == 2
    forget_verdicts()


def test_float64_rounding_measures_float32_against_the_same_weights_widened():
    """A float32 network lies a little from its float64 self, far within a thousandth of a
    nat on a small network; a float64 network not at all."""
    network = small_gemma()
    forward, _, compared = probe_forward(network)
    moved = half_rounding.float64_rounding(network, {**forward, "use_cache": False}, compared)
    assert 0.0 < moved < 1e-4
    wide = small_gemma().double()
    assert half_rounding.float64_rounding(wide, {**forward, "use_cache": False}, compared) == 0.0


def test_under_checkpointing_or_when_not_asked_nothing_changes(tiny_lm, monkeypatch):
    monkeypatch.setattr(ga, "check_grouped_attention", lambda n: pytest.fail("probed"))
    with ga.grouped_attention(tiny_lm.network, enabled=False) as used:
        assert used is False
        assert tiny_lm.network.config._attn_implementation == ga.PLAIN


# the attention heads of the shipped models: (query heads, key/value heads, head width)
SHIPPED = {"SmolLM2-135M": (9, 3, 64), "Gemma 3 270M": (4, 1, 256)}


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("model", sorted(SHIPPED))
def test_the_attention_is_sdpas_on_every_shipped_models_heads(model, dtype):
    """Outputs and gradients against SDPA's at each shipped model's head shapes, in both
    precisions a run takes (relative to the largest entry): float32 to its rounding, bfloat16
    within a few of its 2^-8 steps."""
    difference = ga.function_difference(*SHIPPED[model], dtype)
    assert difference <= (1e-5 if dtype == torch.float32 else 4 * 2**-8)
