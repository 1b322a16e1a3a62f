"""The oneDNN products: equal to `F.linear` in value and gradient, used only where proven and
faster, caught when planted wrong, and undone after the block."""

import json
import logging
from types import SimpleNamespace

import pytest
import torch
import torch.nn.functional as F

from src.model.fast import onednn, packed
from src.model.fast.llama_steps import LlamaSteps
from src.model.fast.probe import verdicts
from src.utils import per_machine
from tests.helpers.models import lora_lm, random_rollout
from tests.helpers.small_llama import SMALL, module_logits, prompts, small_llama, stepped_logits

pytestmark = pytest.mark.skipif(not onednn.available(), reason="torch built without oneDNN")


WIDTHS = (24, 96)  # a network's widths, for the verdicts' tests


def answers(monkeypatch, products: bool, gradients: bool) -> None:
    """The verdicts taken as given at every width (decoding's as the products'), whatever
    this machine's timings say."""
    given = {
        onednn.PATH: products,
        onednn.DECODING: products,
        onednn.HALF_DECODING: products,
        onednn.GRADIENTS: gradients,
    }
    monkeypatch.setattr(
        onednn, "faster_here", lambda widths, verdict=onednn.PATH, rows=None: given[verdict]
    )


@pytest.fixture
def faster(monkeypatch):
    """oneDNN taken as faster here, its gradients' products too."""
    answers(monkeypatch, True, True)


@pytest.fixture
def slower(monkeypatch):
    answers(monkeypatch, False, False)


@pytest.fixture
def fresh(tmp_path, monkeypatch):
    """An empty per-machine cache, and no verdict read yet in this process."""
    monkeypatch.setenv(per_machine.FOLDER_VARIABLE, str(tmp_path))
    monkeypatch.setattr(onednn, "_answers", {})
    return tmp_path


def kept_file(folder, path=onednn.PATH, widths=WIDTHS):
    return folder / f"{onednn.verdict_name(path, widths)}.json"


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


@pytest.mark.parametrize("rows", [1, 5, 32, 70])
def test_a_weight_reordered_once_multiplies_as_the_plain_one(rows):
    """Decoding reorders each weight once for oneDNN (for 32 rows here) and multiplies every
    batch by that copy, the prompts' batches of other sizes too."""
    generator = torch.Generator().manual_seed(0)
    weight, bias = torch.randn(96, 24, generator=generator), torch.randn(96, generator=generator)
    x = torch.randn(rows, 24, generator=generator)
    before = weight.clone()
    reordered = onednn.prepacked(weight, 32)
    plain = F.linear(x, weight, bias)
    assert (onednn.product(x, reordered, bias) - plain).abs().max() <= 1e-5 * plain.abs().max()
    assert torch.equal(weight, before)  # the weight itself is left as it was


def test_decoding_through_onednn_reorders_each_weight_once_and_steps_as_the_modules(monkeypatch):
    answers(monkeypatch, True, True)
    reordered = []
    own = onednn.prepacked
    monkeypatch.setattr(onednn, "prepacked", lambda w, rows: reordered.append(rows) or own(w, rows))
    network = small_llama()
    ids, mask = prompts(SMALL["vocab_size"])
    steps = LlamaSteps.of(network, 6)
    assert steps is not None and steps.packed_products()
    # the fused products of each layer (qkv, out, gate-up, down) and the head, each once
    assert reordered == [6] * (4 * SMALL["num_hidden_layers"] + 1)
    tokens = torch.randint(1, SMALL["vocab_size"], (6, 5))
    ours = stepped_logits(steps, ids, mask, 3, tokens)
    assert (ours - module_logits(network, ids, mask, 3, tokens)).abs().max() < 1e-5
    assert len(reordered) == 4 * SMALL["num_hidden_layers"] + 1  # none reordered per step


def test_the_decoding_verdict_times_onednn_on_weights_reordered_once_read_from_memory(
    fresh, monkeypatch
):
    """As a decoding step multiplies them: each weight reordered once for oneDNN, and so many
    distinct weights in turn that they come from memory, not the caches."""
    monkeypatch.setattr(onednn, "WORK", 1.0)  # one repeat a round: what is given is checked
    monkeypatch.setattr(onednn, "DECODED_BYTES", 2**20)
    seen = {"mkl": [], "onednn": []}

    def recorder(name):
        return lambda x, w, g: seen[name].append((w.is_mkldnn, id(w), w.shape))

    monkeypatch.setattr(onednn, "_mkl_products", recorder("mkl"))
    monkeypatch.setattr(onednn, "_onednn_products", recorder("onednn"))
    onednn._time_both(WIDTHS, onednn.DECODING)
    assert {packed for packed, _, _ in seen["mkl"]} == {False}
    assert {packed for packed, _, _ in seen["onednn"]} == {True}
    for name in seen:
        distinct = {(key, shape) for _, key, shape in seen[name]}
        assert 4 * sum(shape.numel() for _, shape in distinct) >= 2**20
    seen = {"mkl": [], "onednn": []}
    onednn._time_both(WIDTHS, onednn.PATH)  # the log-prob forwards' products: plain weights
    assert {packed for packed, _, _ in seen["mkl"] + seen["onednn"]} == {False}
    assert len({key for _, key, _ in seen["mkl"]}) == 2  # the two shapes' weights, hot


@pytest.mark.parametrize("through_onednn", [True, False], ids=["reordered", "torchs"])
def test_bfloat16_decoding_reads_weights_reordered_once_where_faster_and_steps_alike(
    through_onednn, monkeypatch
):
    """bfloat16 weights are decoded through copies reordered once for oneDNN where its
    verdict says so, to the logits of the steps through torch's bfloat16 product; elsewhere
    nothing is reordered."""
    asked = []

    def verdict(widths, verdict=onednn.PATH, rows=None):
        asked.append(verdict)
        return through_onednn

    monkeypatch.setattr(onednn, "faster_here", verdict)
    reordered = []
    own = onednn.prepacked
    monkeypatch.setattr(
        onednn, "prepacked", lambda w, rows: reordered.append(w.dtype) or own(w, rows)
    )
    network = small_llama().to(torch.bfloat16)
    ids, mask = prompts(SMALL["vocab_size"])
    tokens = torch.randint(1, SMALL["vocab_size"], (6, 5))
    steps = LlamaSteps.of(network, 6)
    assert asked == [onednn.HALF_DECODING]
    assert bool(steps.packed_products()) is through_onednn
    count = 4 * SMALL["num_hidden_layers"] + 1  # each layer's four products and the head, once
    assert reordered == ([torch.bfloat16] * count if through_onednn else [])
    ours = stepped_logits(steps, ids, mask, 3, tokens)
    plain = stepped_logits(LlamaSteps.of(network, 6, pack=False), ids, mask, 3, tokens)
    assert len(reordered) == (count if through_onednn else 0)  # none reordered per step
    assert (ours - plain).abs().max() <= 1e-2 * plain.abs().max()


@pytest.mark.parametrize("factor", [1.0, 1.2], ids=["right", "planted-wrong"])
def test_bfloat16_reordered_products_are_proven_before_use_and_a_wrong_one_caught(
    factor, monkeypatch, caplog
):
    """Steps whose unpacked arithmetic is proven (one row: nothing packs) have each reordered
    bfloat16 product compared with torch's, within bfloat16's tolerance: right ones decode, a
    planted wrong one is refused and the unpacked steps decode instead."""
    from src.model.fast import llama_steps
    from src.model.fast.decoding import decoding_steps
    from src.model.fast.probe import forget_verdicts, standing

    forget_verdicts()
    answers(monkeypatch, True, True)
    network = small_llama().to(torch.bfloat16).eval()
    with decoding_steps(network, rows=1) as steps:
        assert isinstance(steps, LlamaSteps) and not steps.packed_products()
    own = llama_steps.packed_product
    monkeypatch.setattr(
        llama_steps,
        "packed_product",
        lambda *args: (lambda product: lambda x: product(x) * factor)(own(*args)),
    )
    with caplog.at_level(logging.WARNING), decoding_steps(network, rows=6) as steps:
        assert isinstance(steps, LlamaSteps)
        assert bool(steps.packed_products()) is (factor == 1.0)
    assert standing("fused_steps+packed_weights", network).proven is (factor == 1.0)
    assert ("fused_steps+packed_weights disagrees" in caplog.text) is (factor != 1.0)
    forget_verdicts()


def test_the_bfloat16_decoding_verdict_times_bfloat16_weights_read_from_memory(fresh, monkeypatch):
    monkeypatch.setattr(onednn, "WORK", 1.0)
    monkeypatch.setattr(onednn, "DECODED_BYTES", 2**20)
    seen = {"mkl": [], "onednn": []}

    def recorder(name):
        return lambda x, w, g: seen[name].append((x.dtype, w.is_mkldnn, id(w), w.shape))

    monkeypatch.setattr(onednn, "_mkl_products", recorder("mkl"))
    monkeypatch.setattr(onednn, "_onednn_products", recorder("onednn"))
    onednn._time_both(WIDTHS, onednn.HALF_DECODING)
    assert {(dtype, packed) for dtype, packed, _, _ in seen["mkl"]} == {(torch.bfloat16, False)}
    assert {(dtype, packed) for dtype, packed, _, _ in seen["onednn"]} == {(torch.bfloat16, True)}
    distinct = {(key, shape) for _, _, key, shape in seen["mkl"]}
    assert 2 * sum(shape.numel() for _, shape in distinct) >= 2**20  # bfloat16: 2 bytes each
    assert 2 * sum(shape.numel() for _, shape in distinct) < 2 * 2**20  # not float32's count


def test_decoding_asks_the_verdict_of_its_weights_type():
    assert onednn.decoding_verdict(torch.float32) == onednn.DECODING
    assert onednn.decoding_verdict(torch.bfloat16) == onednn.HALF_DECODING
    assert onednn.ROWS[onednn.HALF_DECODING] == onednn.DECODING_ROWS
    name = onednn.verdict_name(onednn.HALF_DECODING, (640, 2048))
    assert name == "onednn_packed_decoding_bf16.640x2048"
    assert onednn.decider(name) is not None  # a kept verdict leads back to its decision


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
    through = packed.decodes_through_onednn(tiny_lm.network)
    assert packed.smallest_packed(through) == packed.MIN_PACKED_ELEMENTS
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
    assert onednn._time_both(WIDTHS).value is False


@pytest.mark.parametrize("kept", [True, False])
def test_the_verdict_a_process_kept_is_read_not_timed_again(kept, fresh, monkeypatch):
    """Every process of a machine takes the same products: a verdict timed in each could
    differ between a run and its continuation, whose sums would then round differently."""
    kept_file(fresh).write_text(json.dumps({per_machine.machine_key(): kept}))
    monkeypatch.setattr(onednn, "_time_both", lambda *a, **k: pytest.fail("timed again"))
    assert onednn.faster_here(WIDTHS) is kept


def test_a_taken_answer_holds_for_this_process_and_is_not_kept(fresh, monkeypatch):
    monkeypatch.setattr(onednn, "_time_both", lambda *a: pytest.fail("timed"))
    for value in (True, False):
        onednn.take(onednn.DECODING, WIDTHS, value)
        assert onednn.faster_here(WIDTHS, onednn.DECODING) is value
    assert not list(fresh.glob("*.json"))


def test_the_first_timing_is_kept_for_the_machine_and_widths(fresh, monkeypatch):
    monkeypatch.setattr(onednn, "_time_both", lambda *a, **k: True)
    assert onednn.faster_here(WIDTHS) is True
    kept = json.loads(kept_file(fresh).read_text())
    assert {key: entry["value"] for key, entry in kept.items()} == {per_machine.machine_key(): True}


def test_each_width_has_a_verdict_of_its_own(fresh, monkeypatch):
    """A verdict timed at SmolLM2's widths says nothing of a tiny model's: each is timed at its
    own and kept apart."""
    timed = []

    def timing(widths, verdict=onednn.PATH, rows=None):
        timed.append((widths, verdict))
        return per_machine.Verdict(widths == (576, 1536), True)

    monkeypatch.setattr(onednn, "_time_both", timing)
    assert onednn.faster_here((576, 1536)) is True
    assert onednn.faster_here((128, 512)) is False
    assert onednn.faster_here((128, 512), onednn.GRADIENTS) is False
    assert onednn.faster_here((128, 512), onednn.DECODING) is False
    assert onednn.faster_here((576, 1536)) is True  # this process's answer, not timed again
    assert timed == [
        ((576, 1536), onednn.PATH),
        ((128, 512), onednn.PATH),
        ((128, 512), onednn.GRADIENTS),
        ((128, 512), onednn.DECODING),
    ]
    names = sorted(path.name for path in fresh.glob("*.json"))
    assert names == [
        "onednn_gradients.128x512.json",
        "onednn_packed_decoding.128x512.json",
        "onednn_products.128x512.json",
        "onednn_products.576x1536.json",
    ]
    assert set(per_machine.choices()) >= {"onednn_products.128x512", "onednn_products.576x1536"}


def test_each_verdict_times_the_widths_own_products_at_its_rows():
    rows, train = onednn.DECODING_ROWS, onednn.TRAINING_ROWS
    assert onednn.shapes_at((128, 512)) == [(train, 128, 512), (train, 512, 128)]
    assert onednn.shapes_at((128, 512), onednn.GRADIENTS) == [(train, 128, 512), (train, 512, 128)]
    assert onednn.shapes_at((128, 512), onednn.DECODING) == [(rows, 128, 512), (rows, 512, 128)]


def test_a_pass_is_timed_at_its_rows_in_powers_of_two_each_under_a_name_of_its_own():
    rows = onednn.TRAINING_ROWS
    assert [onednn.pass_rows(t) for t in (1, 700, 1024, 1400, 1500, 2900, 4288, 10**6)] == [
        rows,
        rows,
        rows,
        rows,
        2 * rows,
        4 * rows,
        4 * rows,
        onednn.MOST_TRAINING_ROWS,
    ]
    assert onednn.shapes_at((128, 512), onednn.PATH, 4096) == [(4096, 128, 512), (4096, 512, 128)]
    # the verdict's own rows keep the name it always had: what it names was timed there
    assert onednn.verdict_name(onednn.PATH, (128, 512), rows) == "onednn_products.128x512"
    assert onednn.verdict_name(onednn.PATH, (128, 512), 4096) == "onednn_products.128x512.rows4096"
    assert onednn.verdict_name(onednn.GRADIENTS, (8, 32), 2048) == "onednn_gradients.8x32.rows2048"


def test_the_routing_asks_both_verdicts_at_the_rows_of_its_pass(monkeypatch):
    monkeypatch.setattr(onednn, "_answers", {})
    asked = []
    monkeypatch.setattr(onednn, "measured_once", lambda name, timing: asked.append(name) or True)
    with onednn.onednn_linears(torch.nn.Sequential(torch.nn.Linear(4, 6)), tokens=4288):
        assert asked == ["onednn_products.4x6.rows4096", "onednn_gradients.4x6.rows4096"]


def test_log_probs_ask_the_verdicts_at_the_tokens_their_pass_reads(tiny_lm, monkeypatch):
    """Each distinct prompt once and every completion but its last token: 2 x 3 prompt
    columns and 64 rows of 49 tokens (3200 tokens: 4096 rows); whole rows read P + T - 1."""
    asked = []

    def faster_here(widths, verdict=onednn.PATH, rows=None):
        asked.append((verdict, rows))
        return False

    monkeypatch.setattr(onednn, "faster_here", faster_here)
    ids = torch.randint(3, 200, (64, 50))
    prompt_ids = torch.randint(3, 200, (2, 3)).repeat_interleave(32, dim=0)
    rollout = SimpleNamespace(
        prompt_ids=prompt_ids,
        prompt_mask=torch.ones_like(prompt_ids),
        completion_ids=ids,
        completion_mask=torch.ones_like(ids),
        action_mask=torch.ones_like(ids),
    )
    with torch.no_grad():
        tiny_lm.log_probs(rollout)
        assert asked[-1] == (onednn.PATH, 4096)
        whole = torch.cat([prompt_ids, ids], dim=1)
        tiny_lm.token_log_probs(whole, torch.ones_like(whole), 50)
        assert asked[-1] == (onednn.PATH, onednn.pass_rows(64 * 52))


def test_a_networks_widths_are_its_weightiest_recurring_linear_shape(tiny_lm):
    assert onednn.widths_of(tiny_lm.network) == (128, 512)  # hidden -> MLP, not the head
    blocks = [
        torch.nn.Linear(*widths) for widths in [(8, 32), (8, 32), (32, 8)] * 2
    ]  # gate, up, down
    head = torch.nn.Linear(8, 4000)  # more weights than any layer, but only once
    assert onednn.widths_of(torch.nn.Sequential(*blocks, head)) == (8, 32)
    assert onednn.widths_of(torch.nn.Sequential(torch.nn.Linear(4, 6))) == (4, 6)
    assert onednn.widths_of(torch.nn.Sequential(torch.nn.ReLU())) is None
    assert onednn.usable(None) is False


def test_a_kept_verdicts_name_leads_back_to_its_decision(fresh, monkeypatch):
    """`benchmarks/fast_paths.py --retime` times again every verdict kept on the machine."""
    timed = []

    def timing(widths, verdict, rows=None):
        timed.append(onednn.shapes_at(widths, verdict, rows)[0][0])
        return verdict == onednn.GRADIENTS

    monkeypatch.setattr(onednn, "_time_both", timing)
    assert onednn.decider("onednn_gradients.24x96")() is True
    assert onednn.decider("onednn_products.24x96")() is False
    assert onednn.decider("onednn_packed_decoding.24x96")() is False
    assert onednn.decider("onednn_products.24x96.rows4096")() is False
    train, decoding = onednn.TRAINING_ROWS, onednn.DECODING_ROWS
    assert timed == [train, train, decoding, 4096]  # each at the rows its name says
    assert kept_file(fresh, onednn.GRADIENTS).exists()
    assert (fresh / "onednn_products.24x96.rows4096.json").exists()
    others = ("onednn_products", "onednn_products.24", "onednn_products.ax9", "fused_steps")
    for other in (*others, "onednn_products.24x96.rows", "onednn_products.24x96.rowsful"):
        assert onednn.decider(other) is None


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
    now, ticks = [0.0], [d for d in durations for d in (0.0, d)]

    def clock() -> float:
        now[0] += ticks.pop(0)
        return now[0]

    clock.ticks = ticks  # what is left unread
    return clock


@pytest.mark.parametrize(
    ("ratios", "busy", "kept"),
    [
        ([0.5] * 9, "", True),  # clearly faster: kept
        ([1.2] * 9, "", True),  # clearly slower: kept
        ([0.5, 1.2] * 13 + [0.5], "", False),  # the rounds straddle FASTER_BY, even 27 of them
        ([0.5, 1.2] * 3 + [0.5] * 21, "", True),  # 9 rounds straddle, 27 settle it
        ([0.88, 0.93, 0.89] * 3, "", True),  # about FASTER_BY, closely: either choice is fine
        ([0.5] * 9, "load 2.10 on 2 processors", False),  # timed beside another job
    ],
    ids=["faster", "slower", "overlapping", "settled by more rounds", "close", "busy"],
)
def test_only_a_clear_verdict_timed_on_a_quiet_machine_is_kept(
    ratios, busy, kept, fresh, monkeypatch
):
    clock = clock_for(ratios)
    monkeypatch.setattr(onednn, "clock", clock)
    monkeypatch.setattr(onednn, "machine_busy", lambda: busy)
    assert onednn.faster_here(WIDTHS) is (sorted(ratios)[len(ratios) // 2] <= onednn.FASTER_BY)
    assert clock.ticks == []  # every round given was timed, and no more
    assert kept_file(fresh).exists() is kept
    # the next process reads a kept verdict, and times again where none was kept
    monkeypatch.setattr(onednn, "_answers", {})
    timed = []
    monkeypatch.setattr(
        onednn, "_time_both", lambda *a, **k: timed.append(1) or per_machine.Verdict(True, True)
    )
    onednn.faster_here(WIDTHS)
    assert timed == ([] if kept else [1])


def test_where_onednn_gradients_are_not_faster_the_backward_takes_torchs_products(monkeypatch):
    """oneDNN's forward may win where its backward does not: the gradients are then torch's
    own products, the same numbers."""
    generator = torch.Generator().manual_seed(0)
    x = torch.randn(5, 8, generator=generator, requires_grad=True)
    weight = torch.randn(6, 8, generator=generator, requires_grad=True)
    monkeypatch.setattr(onednn, "input_grad", lambda *a: pytest.fail("oneDNN input gradient"))
    monkeypatch.setattr(onednn, "weight_grad", lambda *a: pytest.fail("oneDNN weight gradient"))
    onednn.linear(x, weight, gradients=False).sum().backward()
    plain_x, plain_w = x.detach().requires_grad_(), weight.detach().requires_grad_()
    torch.nn.functional.linear(plain_x, plain_w).sum().backward()
    assert torch.allclose(x.grad, plain_x.grad, atol=1e-6)
    assert torch.allclose(weight.grad, plain_w.grad, atol=1e-6)


def test_both_verdicts_are_asked_at_the_networks_widths_where_it_is_routed(monkeypatch):
    """By the routing, before any backward: their timing never lands in an update's."""
    monkeypatch.setattr(onednn, "_answers", {})
    asked = []
    monkeypatch.setattr(onednn, "measured_once", lambda name, timing: asked.append(name) or True)
    with onednn.onednn_linears(torch.nn.Sequential(torch.nn.Linear(4, 6))) as routed:
        assert routed == 1
        assert asked == ["onednn_products.4x6", "onednn_gradients.4x6"]  # not decoding's


@pytest.mark.parametrize("products", [True, False], ids=["onednn", "mkl"])
def test_ask_all_asks_what_a_run_asks_in_its_order(tiny_lm, products, monkeypatch):
    """What `benchmarks/vs_trl.py` reports as a run's choices are those the routing and the
    decoding ask, and no others."""
    monkeypatch.setattr(onednn, "_answers", {})
    asked = []

    def measured(name, timing):
        asked.append(name)
        return products or not name.startswith(onednn.PATH)

    monkeypatch.setattr(onednn, "measured_once", measured)
    with onednn.onednn_linears(tiny_lm.network):
        pass
    packed.decodes_through_onednn(tiny_lm.network)
    by_the_run, asked[:] = list(asked), []
    monkeypatch.setattr(onednn, "_answers", {})
    onednn.ask_all(onednn.widths_of(tiny_lm.network))
    assert asked == by_the_run
    assert len(by_the_run) == (3 if products else 2)


def test_ask_all_asks_bfloat16_decodings_verdict_for_a_bfloat16_run(monkeypatch):
    monkeypatch.setattr(onednn, "_answers", {})
    asked = []
    monkeypatch.setattr(onednn, "measured_once", lambda name, timing: asked.append(name))
    onednn.ask_all(WIDTHS, dtype=torch.bfloat16)
    assert [name.split(".")[0] for name in asked] == [onednn.PATH, onednn.HALF_DECODING]


def test_where_the_gradients_verdict_is_mkl_the_routed_mlp_backward_takes_torchs(
    tiny_lm, monkeypatch
):
    """The lean MLP's down projection follows the routed layers' gradients verdict too."""
    answers(monkeypatch, True, False)
    sequences = random_rollout(tiny_lm, ["Hi there"], width=5)
    with onednn.onednn_linears(tiny_lm.network) as routed:  # proven here, on both products
        assert routed > 0
        assert not any(onednn.routes_gradients(m) for m in tiny_lm.network.modules())
    monkeypatch.setattr(onednn, "input_grad", lambda *a: pytest.fail("oneDNN input gradient"))
    monkeypatch.setattr(onednn, "weight_grad", lambda *a: pytest.fail("oneDNN weight gradient"))
    log_probs_and_grads(tiny_lm, sequences)  # routed inside, its backward on torch's products


@pytest.mark.parametrize(
    ("count", "ranks"), [(1, (0, 0)), (2, (0, 1)), (9, (1, 7)), (27, (8, 18)), (100, (41, 58))]
)
def test_the_medians_bounds_are_the_order_statistics_of_a_90_percent_interval(count, ranks):
    values = [float(i) for i in reversed(range(count))]  # any order
    assert onednn.median_bounds(values) == ranks
    # the interval's two tails, each the chance that at most `low` of the values fall below
    # the median, are within 10 % together, and one rank further in they would not be
    low = ranks[0]
    if count > 2:
        tail = onednn._binomial_tail
        assert 2 * tail(low, count) <= 0.1 < 2 * tail(low + 1, count)
