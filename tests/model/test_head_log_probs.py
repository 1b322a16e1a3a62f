"""Log-probs from hidden states with the head run in chunks of positions and blocks of the
vocabulary: today's full-logits values, entropies and gradients within 1e-5 in float32,
whatever the chunk and the block."""

import pytest
import torch
import torch.nn.functional as F

from src.model import head_log_probs as module
from src.model.causal_lm import target_log_probs
from src.model.head_log_probs import Head, head_log_probs


@pytest.fixture(params=[4, 11, 4096], ids=["blocks-of-4", "one-exact-block", "one-block"])
def vocab_block(request, monkeypatch):
    """The 11-entry vocabulary of `inputs` in three blocks (the last of 3), or in one."""
    monkeypatch.setattr(module, "VOCAB_BLOCK", request.param)
    return request.param


def inputs(bias: bool, seed: int = 0):
    generator = torch.Generator().manual_seed(seed)
    hidden = torch.randn(3, 5, 8, generator=generator, requires_grad=True)
    weight = torch.randn(11, 8, generator=generator, requires_grad=True)
    offset = torch.randn(11, generator=generator, requires_grad=True) if bias else None
    targets = torch.randint(0, 11, (3, 5), generator=generator)
    return hidden, weight, offset, targets


@pytest.mark.parametrize("chunk", [11, 3 * 11, 10**9], ids=["one-position", "three", "all"])
@pytest.mark.parametrize("temperature", [1.0, 0.7])
@pytest.mark.parametrize("bias", [False, True])
@pytest.mark.parametrize("frozen", [False, True], ids=["trained-head", "frozen-head"])
def test_chunked_head_gives_the_full_logits_values_and_gradients(
    chunk, temperature, bias, frozen, vocab_block
):
    """A trained head gets its gradient in the backward; a frozen one (LoRA) has the hidden
    states' gradient made in the forward: both equal the full logits' gradients."""
    hidden, weight, offset, targets = inputs(bias)
    if frozen:
        weight.requires_grad_(False)
        offset = None if offset is None else offset.requires_grad_(False)
    weights = torch.rand(3, 5)  # a loss that weighs every log-prob differently
    full, full_entropy = target_log_probs(
        F.linear(hidden, weight, offset), targets, temperature, True
    )
    (full * weights).sum().backward()
    expected = [
        t.grad.clone() for t in (hidden, weight, offset) if t is not None and t.grad is not None
    ]
    for t in (hidden, weight, offset):
        if t is not None:
            t.grad = None
    ours, entropy = head_log_probs(hidden, Head(weight, offset, temperature), targets, True, chunk)
    (ours * weights).sum().backward()
    found = [t.grad for t in (hidden, weight, offset) if t is not None and t.grad is not None]
    assert len(found) == len(expected) == (1 if frozen else 3 if bias else 2)
    assert ours.dtype == torch.float32 and ours.shape == (3, 5)
    assert (ours - full).abs().max() < 1e-5
    assert (entropy - full_entropy).abs().max() < 1e-5
    for mine, theirs in zip(found, expected, strict=True):
        assert (mine - theirs).abs().max() < 1e-5


def test_a_frozen_head_gets_no_gradient_and_no_entropy_is_made_unasked():
    hidden, weight, _, targets = inputs(False)
    weight = weight.detach()
    logps, entropy = head_log_probs(hidden, Head(weight), targets, chunk=22)
    logps.sum().backward()
    assert entropy is None and weight.grad is None and hidden.grad is not None


def test_gradcheck_in_float64(vocab_block):
    generator = torch.Generator().manual_seed(1)
    hidden = torch.randn(2, 3, 4, dtype=torch.float64, generator=generator, requires_grad=True)
    weight = torch.randn(7, 4, dtype=torch.float64, generator=generator, requires_grad=True)
    targets = torch.randint(0, 7, (2, 3), generator=generator)

    def logps(h, w):  # float32 inside, so compare with a float32 tolerance
        return head_log_probs(h, Head(w, None, 0.9), targets, chunk=14)[0].double()

    assert torch.autograd.gradcheck(logps, (hidden, weight), eps=1e-3, atol=1e-3, rtol=1e-2)


def test_a_frozen_heads_gradient_made_in_the_forward_scales_with_the_upstream_gradient():
    """The hidden states' gradient kept from the forward is multiplied by each position's
    upstream gradient, whatever it is: twice the loss, twice the gradient; a zero weight,
    no gradient at that position."""
    hidden, weight, _, targets = inputs(False, seed=4)
    weight = weight.detach()
    logps, _ = head_log_probs(hidden, Head(weight), targets, chunk=22)
    scale = torch.rand(3, 5)
    scale[1, 2] = 0.0
    (grad,) = torch.autograd.grad((logps * scale).sum(), hidden, retain_graph=True)
    (twice,) = torch.autograd.grad((logps * scale * 2).sum(), hidden)
    assert torch.allclose(twice, 2 * grad) and grad[1, 2].abs().max() == 0
    assert grad[0, 0].abs().max() > 0


@pytest.mark.parametrize("frozen", [False, True], ids=["trained-head", "frozen-head"])
def test_masked_positions_are_skipped_and_the_rest_is_unchanged(frozen, vocab_block):
    """Padding after a row's end is not scored: log-prob and entropy 0, no gradient there;
    every scored position's value and gradient is the unmasked one's."""
    hidden, weight, offset, targets = inputs(True, seed=1)
    if frozen:
        weight.requires_grad_(False)
        offset.requires_grad_(False)
    mask = torch.tensor([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1], [1, 0, 0, 0, 0]])
    weights = torch.rand(3, 5) * mask  # a loss that masks the padding, as every loss does
    plain, plain_entropy = head_log_probs(
        hidden, Head(weight, offset, 0.7), targets, True, chunk=22
    )
    (plain * weights).sum().backward()
    trained = [t for t in (hidden, weight, offset) if t.requires_grad]
    expected = [t.grad.clone() for t in trained]
    for t in trained:
        t.grad = None
    ours, entropy = head_log_probs(
        hidden, Head(weight, offset, 0.7), targets, True, chunk=22, mask=mask
    )
    (ours * weights).sum().backward()
    scored = mask.bool()
    assert torch.equal(ours[~scored], torch.zeros(int((~scored).sum())))
    assert torch.equal(entropy[~scored], torch.zeros(int((~scored).sum())))
    assert (ours - plain)[scored].abs().max() < 1e-6
    assert (entropy - plain_entropy)[scored].abs().max() < 1e-6
    for t, theirs in zip(trained, expected, strict=True):
        assert (t.grad - theirs).abs().max() < 1e-6
    assert torch.equal(hidden.grad[~scored], torch.zeros(int((~scored).sum()), 8))


def test_a_mask_of_ones_takes_the_plain_path():
    hidden, weight, _, targets = inputs(False)
    plain, _ = head_log_probs(hidden.detach(), Head(weight.detach()), targets)
    ours, _ = head_log_probs(
        hidden.detach(), Head(weight.detach()), targets, mask=torch.ones(3, 5, dtype=torch.long)
    )
    assert torch.equal(ours, plain)


@pytest.mark.parametrize("temperature", [1.0, 0.7])
def test_a_block_whose_largest_logit_comes_late_rescales_what_was_summed(temperature, monkeypatch):
    """The online log-sum-exp: logits rising from block to block (each block raises the
    running largest one), and one far above the rest in the last block, whose exponentials
    of the earlier blocks underflow to 0 against it: the same log normaliser, log-probs and
    entropy as one log-softmax over the whole vocabulary."""
    monkeypatch.setattr(module, "VOCAB_BLOCK", 3)
    weight = torch.arange(10.0).unsqueeze(-1)  # z_v = v h
    weight[9] = 200.0
    hidden = torch.tensor([[[1.0], [0.5], [-1.0]]])
    targets = torch.tensor([[9, 2, 0]])
    ours, entropy = head_log_probs(hidden, Head(weight, None, temperature), targets, True)
    full, full_entropy = target_log_probs(F.linear(hidden, weight), targets, temperature, True)
    assert torch.isfinite(ours).all() and ours[0, 0] > -1e-6
    assert (ours - full).abs().max() < 1e-5
    assert (entropy - full_entropy).abs().max() < 1e-5


@pytest.mark.parametrize("frozen", [False, True], ids=["trained-head", "frozen-head"])
def test_a_bfloat16_head_scores_its_rounded_logits_in_float32(frozen, monkeypatch):
    """Under a half type the logits are the product's rounded ones, widened: the values and
    the gradients of the full bfloat16 logits' log-softmax in float32, within bfloat16's
    rounding of the gradient's products."""
    monkeypatch.setattr(module, "VOCAB_BLOCK", 16)
    generator = torch.Generator().manual_seed(3)
    hidden = torch.randn(2, 6, 32, generator=generator).bfloat16().requires_grad_()
    weight = torch.randn(50, 32, generator=generator).bfloat16().requires_grad_(not frozen)
    targets = torch.randint(0, 50, (2, 6), generator=generator)
    full, full_entropy = target_log_probs(F.linear(hidden, weight), targets, 1.0, True)
    full.sum().backward()
    expected = [t.grad.clone() for t in (hidden, weight) if t.grad is not None]
    hidden.grad = weight.grad = None
    ours, entropy = head_log_probs(hidden, Head(weight), targets, True, chunk=100)
    ours.sum().backward()
    found = [t.grad for t in (hidden, weight) if t.grad is not None]
    assert ours.dtype == torch.float32 and len(found) == len(expected) == (1 if frozen else 2)
    assert (ours - full).abs().max() < 1e-5
    assert (entropy - full_entropy).abs().max() < 1e-5
    for mine, theirs in zip(found, expected, strict=True):
        assert mine.dtype == theirs.dtype == torch.bfloat16
        assert (mine.float() - theirs.float()).abs().max() < 0.05 * theirs.float().abs().max()
