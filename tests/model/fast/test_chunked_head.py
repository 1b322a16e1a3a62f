"""Fast path `chunked_head`: log-probs from the decoder's hidden states and the head in
chunks equal today's full logits, values, entropies and gradients, through both scoring
routes of `CausalLM`; a network with something after its head is turned away."""

import pytest
import torch

from src.model import head_log_probs
from src.model.causal_lm import CausalLM
from src.model.fast.chunked_head import check_chunked_head, plain_head
from src.model.fast.probe import forget_verdicts
from tests.helpers.models import lora_lm, random_rollout
from tests.helpers.small_llama import small_llama


def scored(lm: CausalLM, rollout, chunks: bool, monkeypatch) -> tuple:
    """Log-probs, entropies and the trainable parameters' gradients of a weighted sum over
    the tokens the policy wrote (as every loss masks padding and inserted tokens); the
    values of the others 0."""
    monkeypatch.setattr(CausalLM, "_head_in_chunks", lambda self, positions: chunks)
    monkeypatch.setattr(head_log_probs, "HEAD_CHUNK", 300)  # one position per chunk
    lm.zero_grad()
    logps, entropy = lm.log_probs(rollout, temperature=0.8, with_entropy=True)
    mask = rollout.action_mask
    weights = torch.linspace(0.1, 1.0, logps.numel()).view_as(logps) * mask
    (logps * weights).sum().backward()
    grads = [p.grad.clone() for p in lm.trainable_parameters()]
    if chunks:  # the head skipped what is not scored
        assert not logps.detach()[mask == 0].any()
    return logps.detach() * mask, entropy * mask, grads


@pytest.mark.parametrize("adapter", [False, True], ids=["full", "lora"])
@pytest.mark.parametrize("grouped", [True, False], ids=["shared-prompt", "whole-rows"])
@pytest.mark.parametrize("ended", [False, True], ids=["full-width", "rows-ended-early"])
@pytest.mark.parametrize("inserted", [False, True], ids=["written", "with-inserted-tokens"])
def test_chunked_head_scores_as_the_full_logits(
    tiny_lm, adapter, grouped, ended, inserted, monkeypatch
):
    lm = lora_lm(tiny_lm) if adapter else tiny_lm
    rollout = random_rollout(lm, ["What is 2 + 3?", "Hi"], group_size=3 if grouped else 1)
    if not grouped:  # two distinct prompts, one row each: nothing shared, whole rows scored
        assert rollout.prompt_ids.size(0) == 2
    if ended:  # rows that ended early: padding after them, which the chunked head skips
        lengths = torch.tensor([12, 5, 1, 9, 12, 3][: rollout.completion_ids.size(0)])
        rollout.completion_mask = (torch.arange(12) < lengths.unsqueeze(1)).long()
        rollout.completion_ids = rollout.completion_ids.masked_fill(
            rollout.completion_mask == 0, lm.tokenizer.pad_token_id
        )
    if inserted:  # a tool's passage inside each row: context, never scored by the head
        rollout.inserted_mask = torch.zeros_like(rollout.completion_ids)
        rollout.inserted_mask[:, 2:6] = 1
    full = scored(lm, rollout, False, monkeypatch)
    ours = scored(lm, rollout, True, monkeypatch)
    assert (ours[0] - full[0]).abs().max() < 1e-5
    assert (ours[1] - full[1]).abs().max() < 1e-5
    for mine, theirs in zip(ours[2], full[2], strict=True):
        assert (mine - theirs).abs().max() <= 1e-5 * max(1.0, float(theirs.abs().max()))


def test_the_probe_proves_plain_heads_and_catches_a_scaled_one(tiny_lm):
    forget_verdicts()
    assert check_chunked_head(tiny_lm.network) < 1e-5
    network = small_llama()
    assert plain_head(network) is not None and check_chunked_head(network) < 1e-5
    original = type(network).forward

    def scaled(self, *args, **kwargs):  # a model that scales its logits after the head
        out = original(self, *args, **kwargs)
        out.logits = out.logits * 0.5
        return out

    network.forward = scaled.__get__(network)
    assert check_chunked_head(network) > 1e-2
