"""Tokens a search inserts into a completion (`Rollout.inserted_mask`) are context, not actions:
the loss, its KL term, the entropy and the token counts that normalise them see only the tokens
the policy wrote, while the policy's log-probs are taken with the inserted tokens in context."""

import dataclasses

import pytest
import torch

from src.rollout.rollout import Rollout, join_rollouts
from tests.grpo.test_passes import assert_both_are, update

ADVANTAGES = torch.tensor([1.0, -1.0, 0.0, 0.5, 0, 0, 0, 0, -0.3, 0.2, 0.4, -0.3])


def with_insertions(rollout):
    """The rollout with tokens 1-2 of rows 0, 1, 8 and 11 marked as inserted (all six
    completions of the fixture are longer than 3 tokens there)."""
    inserted = torch.zeros_like(rollout.completion_mask)
    inserted[[0, 1, 8, 11], 1:3] = 1
    assert (rollout.completion_mask[[0, 1, 8, 11], :4] == 1).all()
    return dataclasses.replace(rollout, inserted_mask=inserted)


def test_the_loss_of_a_scripted_turn_is_over_the_policys_tokens_by_hand(rollout_and_lm):
    """On-policy (old = the current log-probs, every ratio 1) with no KL term the token-mean
    loss is -sum(A * action) / sum(action), whatever the log-probs: a count by hand."""
    rollout, lm = rollout_and_lm
    part = Rollout(
        prompt_ids=rollout.prompt_ids[:2],
        prompt_mask=rollout.prompt_mask[:2],
        completion_ids=rollout.completion_ids[:2, :4],
        completion_mask=torch.tensor([[1, 1, 1, 1], [1, 1, 1, 0]]),
        is_clipped=torch.zeros(2, dtype=torch.bool),
        completions=["", ""],
        inserted_mask=torch.tensor([[0, 1, 1, 0], [0, 0, 0, 0]]),
    )
    with torch.no_grad():
        old = lm.log_probs(part)[0]
    advantages = torch.tensor([1.0, -1.0])
    result = update(
        lm, part, advantages, old, None, budget=None, loss_type="token-mean", kl_beta=0.0
    )
    # row 0 wrote tokens 0 and 3 (A = +1), row 1 tokens 0-2 (A = -1): -(2 - 3) / 5
    assert result[1] == pytest.approx(0.2, abs=1e-6)
    plain = update(
        lm, dataclasses.replace(part, inserted_mask=None), advantages, old, None,
        budget=None, loss_type="token-mean", kl_beta=0.0,
    )  # fmt: skip
    assert plain[1] == pytest.approx(-(4 - 3) / 7, abs=1e-6)  # every token counted


@pytest.mark.parametrize(("loss_type", "kl_beta"), [("token-mean", 0.1), ("grpo", 0.1)])
def test_inserted_tokens_leave_every_term_in_every_pass(rollout_and_lm, loss_type, kl_beta):
    rollout, lm = rollout_and_lm
    rollout = with_insertions(rollout)
    with torch.no_grad():
        logps, entropy = lm.log_probs(rollout, with_entropy=True)
    old = logps + 0.3 * torch.randn(logps.shape)
    ref = logps + 0.2 * torch.randn(logps.shape)
    args = (lm, rollout, ADVANTAGES, old, ref)
    one = update(*args, budget=None, loss_type=loss_type, kl_beta=kl_beta)
    many = update(*args, budget=12, loss_type=loss_type, kl_beta=kl_beta)
    action = rollout.action_mask
    assert action.sum() == rollout.completion_mask.sum() - 8
    loss = {"beta": kl_beta, "epsilon_low": 0.2, "epsilon_high": 0.2, "loss_type": loss_type}
    assert_both_are(one, many, lm, (rollout, old, ref, ADVANTAGES, action), loss)
    wanted = (entropy * action).sum() / action.sum()
    assert one[2]["entropy"] == pytest.approx(wanted.item(), rel=1e-5)
    assert one[3]["tokens"] == action.sum().item()  # the count that normalises the metrics


def test_an_inserted_token_is_context_with_no_term_of_its_own(rollout_and_lm):
    rollout, lm = rollout_and_lm
    rollout = with_insertions(rollout)
    with torch.no_grad():
        logps = lm.log_probs(rollout)[0]
    old = logps + 0.3 * torch.randn(logps.shape)
    ref = logps + 0.2 * torch.randn(logps.shape)
    options = {"budget": None, "loss_type": "token-mean", "kl_beta": 0.1}
    base = update(lm, rollout, ADVANTAGES, old, ref, **options)
    inserted = rollout.inserted_mask.bool()
    # what the inserted positions' old and reference log-probs say never enters the loss
    moved = update(lm, rollout, ADVANTAGES, old + 5.0 * inserted, ref - 5.0 * inserted, **options)
    assert moved[1] == pytest.approx(base[1], abs=1e-6)
    assert all(torch.allclose(a, b, atol=1e-7) for a, b in zip(base[4], moved[4], strict=True))
    # other inserted tokens: the policy's own tokens after them are read in another context
    ids = rollout.completion_ids.clone()
    ids[inserted] = (ids[inserted] + 1) % lm.network.config.vocab_size
    other = dataclasses.replace(rollout, completion_ids=ids)
    with torch.no_grad():
        other_logps = lm.log_probs(other)[0]
    after = torch.zeros_like(inserted)
    after[[0, 1, 8, 11], 3] = True
    assert not torch.allclose(other_logps[after], logps[after])
    assert torch.allclose(other_logps[:, :1], logps[:, :1], atol=1e-6)  # before: unchanged
    changed = update(lm, other, ADVANTAGES, old, ref, **options)
    assert changed[1] != pytest.approx(base[1], abs=1e-6)


def test_selecting_and_joining_keep_the_inserted_tokens(rollout_and_lm):
    rollout, _ = rollout_and_lm
    marked = with_insertions(rollout)
    rows = torch.zeros(12, dtype=torch.bool)
    rows[[0, 2, 8]] = True
    part = marked.select(rows)
    assert part.inserted_mask.shape == part.completion_ids.shape
    assert part.inserted_mask[:, 1:3].tolist() == [[1, 1], [0, 0], [1, 1]]
    joined = join_rollouts([part, rollout.select(rows)], pad_token_id=0)
    assert joined.inserted_mask.sum() == 4  # the unmarked rollout joins with none inserted
    assert joined.action_mask.sum() == 2 * part.completion_mask.sum() - 4
