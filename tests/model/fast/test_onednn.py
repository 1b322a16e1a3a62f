"""The oneDNN products: equal to `F.linear` in value and gradient, used only where proven and
faster, caught when planted wrong, and undone after the block."""

import json
import logging

import pytest
import torch
import torch.nn.functional as F

from src.model.fast import onednn, packed
from src.model.fast.probe import verdicts
from src.utils import per_machine
from tests.helpers.models import lora_lm, random_rollout

pytestmark = pytest.mark.skipif(not onednn.available(), reason="torch built without oneDNN")


@pytest.fixture
def faster(monkeypatch):
    """oneDNN taken as faster here, its gradients' products too, whatever this machine's
    timings say."""
    monkeypatch.setattr(onednn, "_faster", [True])
    monkeypatch.setattr(onednn, "_gradients_faster", [True])


@pytest.fixture
def slower(monkeypatch):
    monkeypatch.setattr(onednn, "_faster", [False])


def weighted_sum(out):
    return (out * torch.linspace(-1.0, 1.0, out.numel()).view_as(out)).sum()


@pytest.mark.parametrize("bias", [True, False])
def test_the_product_and_its_gradients_equal_torchs(bias):
    generator = torch.Generator().manual_seed(0)
    x = torch.randn(3, 5, 24, generator=generator)
    weight = torch.randn(40, 24, generator=generator)
    b = torch.randn(40, generator=generator) if bias else None
    results = []
    for run in (F.linear, onednn.linear):
        leaves = [x.clone().requires_grad_(), weight.clone().requires_grad_()]
        if b is not None:
            leaves.append(b.clone().requires_grad_())
        out = run(*leaves[:2], leaves[2] if bias else None)
        results.append((out.detach(), *torch.autograd.grad(weighted_sum(out), leaves)))
    for theirs, ours in zip(*results, strict=True):
        assert (ours - theirs).abs().max() <= 1e-5 * theirs.abs().max()
    assert results[0][1].abs().max() > 0  # gradients to compare


def test_without_gradients_it_makes_no_graph():
    x, weight = torch.randn(4, 8), torch.randn(6, 8, requires_grad=True)
    with torch.no_grad():
        assert onednn.linear(x, weight).grad_fn is None
    assert onednn.linear(x, weight).grad_fn is not None


def log_probs_and_grads(lm, sequences):
    logps, _ = lm.log_probs(sequences)
    grads = torch.autograd.grad(weighted_sum(logps), lm.trainable_parameters())
    return logps.detach(), grads


@pytest.mark.parametrize("adapter", [False, True], ids=["full", "lora"])
def test_log_probs_and_gradients_equal_the_plain_products(tiny_lm, adapter, faster, monkeypatch):
    lm = lora_lm(tiny_lm) if adapter else tiny_lm
    sequences = random_rollout(lm, ["What is 12 + 30?\nAnswer:", "Hi"], width=6)
    fast, fast_grads = log_probs_and_grads(lm, sequences)
    assert any(v.path.startswith("onednn_products") and v.proven for v in verdicts())
    monkeypatch.setenv("GRPO_FAST_PATHS_OFF", "onednn_products")
    plain, plain_grads = log_probs_and_grads(lm, sequences)
    assert (fast - plain).abs().max() <= 1e-4
    for ours, theirs in zip(fast_grads, plain_grads, strict=True):
        assert (ours - theirs).abs().max() <= 1e-4 * theirs.abs().max()
    assert not any("forward" in vars(module) for module in lm.network.modules())


def test_the_layers_are_routed_in_the_block_and_restored_after(tiny_lm, faster):
    linears = [m for m in tiny_lm.network.modules() if type(m) is torch.nn.Linear]
    with onednn.onednn_linears(tiny_lm.network) as routed:
        assert routed == len(linears) and all(onednn.is_routed(m) for m in linears)
    assert not any(onednn.is_routed(m) for m in linears)


def test_where_it_is_not_faster_nothing_changes(tiny_lm, slower):
    with onednn.onednn_linears(tiny_lm.network) as routed:
        assert routed == 0
    assert packed.smallest_packed() == packed.MIN_PACKED_ELEMENTS
    assert not any(v.path.startswith("onednn_products") for v in verdicts())  # not even probed


@pytest.mark.parametrize("wrong", ["input_grad", "weight_grad"])
def test_a_wrong_gradient_is_caught_and_the_plain_products_run(
    tiny_lm, wrong, faster, monkeypatch, caplog
):
    sequences = random_rollout(tiny_lm, ["Hi there"], width=5)
    monkeypatch.setenv("GRPO_FAST_PATHS_OFF", "onednn_products")
    plain, plain_grads = log_probs_and_grads(tiny_lm, sequences)
    monkeypatch.delenv("GRPO_FAST_PATHS_OFF")
    own = getattr(onednn, wrong)
    monkeypatch.setattr(onednn, wrong, lambda grad, other: own(grad, other) * 1.01)
    with caplog.at_level(logging.INFO):
        fast, fast_grads = log_probs_and_grads(tiny_lm, sequences)
    warned = [
        r for r in caplog.records if "onednn_products+weight_grads disagrees" in r.getMessage()
    ]
    assert len(warned) == 1 and warned[0].levelno == logging.WARNING
    assert torch.equal(fast, plain)
    assert all(torch.equal(a, b) for a, b in zip(fast_grads, plain_grads, strict=True))


def test_a_broken_op_counts_as_not_faster(monkeypatch):
    def broken(*args, **kwargs):
        raise RuntimeError("no such kernel")

    monkeypatch.setattr(onednn, "product", broken)
    assert onednn._time_both().value is False


@pytest.mark.parametrize("kept", [True, False])
def test_the_verdict_a_process_kept_is_read_not_timed_again(kept, tmp_path, monkeypatch):
    """Every process of a machine takes the same products: a verdict timed in each could
    differ between a run and its continuation, whose sums would then round differently."""
    monkeypatch.setenv(per_machine.FOLDER_VARIABLE, str(tmp_path))
    (tmp_path / f"{onednn.PATH}.json").write_text(json.dumps({per_machine.machine_key(): kept}))
    monkeypatch.setattr(onednn, "_faster", [])
    monkeypatch.setattr(onednn, "_time_both", lambda: pytest.fail("timed again"))
    assert onednn.faster_here() is kept


def test_the_first_timing_is_kept_for_the_machine(tmp_path, monkeypatch):
    monkeypatch.setenv(per_machine.FOLDER_VARIABLE, str(tmp_path))
    monkeypatch.setattr(onednn, "_faster", [])
    monkeypatch.setattr(onednn, "_time_both", lambda: True)
    assert onednn.faster_here() is True
    kept = json.loads((tmp_path / f"{onednn.PATH}.json").read_text())
    assert {key: entry["value"] for key, entry in kept.items()} == {per_machine.machine_key(): True}


def test_first_used_under_inference_mode_it_is_proven_and_routes(tiny_lm, faster, caplog):
    """Lightning validates under inference mode: a frozen scorer may be the first user."""
    linears = [m for m in tiny_lm.network.modules() if type(m) is torch.nn.Linear]
    with (
        caplog.at_level(logging.WARNING),
        torch.inference_mode(),
        onednn.onednn_linears(tiny_lm.network) as routed,
    ):
        assert routed == len(linears)
    assert not [r for r in caplog.records if "disagrees" in r.getMessage()]
    assert any(v.path.startswith("onednn_products") and v.proven for v in verdicts())


def clock_for(ratios: list[float]):
    """A stub clock under which each round of `_time_both` times MKL at 1 ms and oneDNN at
    ratio ms (the warm-up round first, at ratio 1)."""
    durations = []
    for turn, ratio in enumerate([1.0, *ratios]):
        order = ["mkl", "onednn"] if turn % 2 else ["onednn", "mkl"]
        durations += [1e-3 * (ratio if name == "onednn" else 1.0) for name in order]
    now, ticks = [0.0], iter([d for d in durations for d in (0.0, d)])

    def clock() -> float:
        now[0] += next(ticks)
        return now[0]

    return clock


@pytest.mark.parametrize(
    ("ratios", "busy", "kept"),
    [
        ([0.5] * 9, "", True),  # clearly faster: kept
        ([1.2] * 9, "", True),  # clearly slower: kept
        ([0.5, 1.2] * 4 + [0.5], "", False),  # the rounds straddle FASTER_BY
        ([0.5] * 9, "load 2.10 on 2 processors", False),  # timed beside another job
    ],
    ids=["faster", "slower", "overlapping", "busy"],
)
def test_only_a_clear_verdict_timed_on_a_quiet_machine_is_kept(
    ratios, busy, kept, tmp_path, monkeypatch
):
    monkeypatch.setenv(per_machine.FOLDER_VARIABLE, str(tmp_path))
    monkeypatch.setattr(onednn, "clock", clock_for(ratios))
    monkeypatch.setattr(onednn, "machine_busy", lambda: busy)
    monkeypatch.setattr(onednn, "_faster", [])
    assert onednn.faster_here() is (sorted(ratios)[len(ratios) // 2] <= onednn.FASTER_BY)
    path = tmp_path / f"{onednn.PATH}.json"
    assert path.exists() is kept
    # the next process reads a kept verdict, and times again where none was kept
    monkeypatch.setattr(onednn, "_faster", [])
    timed = []
    monkeypatch.setattr(
        onednn, "_time_both", lambda: timed.append(1) or per_machine.Verdict(True, True)
    )
    onednn.faster_here()
    assert timed == ([] if kept else [1])


def test_where_onednn_gradients_are_not_faster_the_backward_takes_torchs_products(monkeypatch):
    """oneDNN's forward may win where its backward does not: the gradients are then torch's
    own products, the same numbers."""
    generator = torch.Generator().manual_seed(0)
    x = torch.randn(5, 8, generator=generator, requires_grad=True)
    weight = torch.randn(6, 8, generator=generator, requires_grad=True)
    monkeypatch.setattr(onednn, "_gradients_faster", [False])
    monkeypatch.setattr(onednn, "input_grad", lambda *a: pytest.fail("oneDNN input gradient"))
    monkeypatch.setattr(onednn, "weight_grad", lambda *a: pytest.fail("oneDNN weight gradient"))
    onednn.linear(x, weight).sum().backward()
    plain_x, plain_w = x.detach().requires_grad_(), weight.detach().requires_grad_()
    torch.nn.functional.linear(plain_x, plain_w).sum().backward()
    assert torch.allclose(x.grad, plain_x.grad, atol=1e-6)
    assert torch.allclose(weight.grad, plain_w.grad, atol=1e-6)


def test_the_gradients_verdict_is_asked_where_the_network_is_routed(monkeypatch):
    """By the proof, before any backward: its timing never lands in an update's."""
    monkeypatch.setattr(onednn, "_faster", [True])
    monkeypatch.setattr(onednn, "_gradients_faster", [])
    asked = []
    monkeypatch.setattr(onednn, "measured_once", lambda name, timing: asked.append(name) or True)
    with onednn.onednn_linears(torch.nn.Sequential(torch.nn.Linear(4, 4))) as routed:
        assert routed == 1 and asked == [onednn.GRADIENTS]
