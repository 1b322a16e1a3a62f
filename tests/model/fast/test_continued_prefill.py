"""Rows that continue shared prompts read each prompt once (`continued_prefill`): the logits of
their contexts and of the steps after are those of one forward over the whole sequences, for
Llama-family networks and for Gemma 3's sliding windows; a planted layout bug is caught and the
whole contexts run; a multi-turn rollout is the same either way."""

from functools import partial

import pytest
import torch

from src.model.fast import probe
from src.model.fast.continued_prefill import ContinuedLayout, continued_difference
from src.model.fast.llama_steps import LlamaSteps
from src.model.positions import position_ids
from src.model.steps import RowContexts, whole_contexts
from src.rollout.hf import HFSampler
from src.rollout.multi_turn import MultiTurnSampler, Tags
from tests.helpers.small_gemma import small_gemma
from tests.helpers.small_llama import SERVED, SMALL

NETWORKS = {**SERVED, "gemma": small_gemma}


@pytest.fixture(autouse=True)
def fresh_verdicts(monkeypatch):
    """Each test proves the path again: no verdict kept from another test."""
    monkeypatch.setattr(probe, "_verdicts", {})


def uneven_contexts():
    """Three prompts of 7, 5 and 1 tokens; five rows with own suffixes of 0 to 6 tokens, one
    row's whole context shorter than the longest suffix."""
    generator = torch.Generator().manual_seed(7)
    ids = torch.randint(1, SMALL["vocab_size"], (3, 7), generator=generator)
    mask = torch.ones_like(ids)
    mask[1, :2] = 0
    mask[2, :6] = 0
    lengths = (2, 6, 0, 1, 3)
    suffixes = [torch.randint(1, 61, (n,), generator=generator).tolist() for n in lengths]
    return RowContexts(ids, mask, [0, 0, 1, 2, 2], suffixes)


def plain_logits(network, contexts, fed):
    """Log-softmax of one forward over each row's whole context and the fed tokens: at the
    context's last position and each fed token's but the last."""
    ids, mask = contexts.full(0)
    whole = torch.cat([mask, mask.new_ones(mask.size(0), fed.size(1) - 1)], dim=1)
    logits = network(
        input_ids=torch.cat([ids, fed[:, :-1]], dim=1),
        attention_mask=whole,
        position_ids=position_ids(whole),
    ).logits[:, -fed.size(1) :]
    return logits.log_softmax(dim=-1)


def continued_logits(steps, contexts, fed):
    ids, mask = contexts.full(0)
    position = mask.sum(dim=1, keepdim=True)
    out = [steps.continued_prefill(contexts, 0, fed.size(1))]
    out += [steps.step(fed[:, k], position + k) for k in range(fed.size(1) - 1)]
    return torch.stack(out, dim=1).log_softmax(dim=-1)


@pytest.mark.parametrize("build", NETWORKS.values(), ids=NETWORKS.keys())
def test_rows_after_shared_prompts_get_the_whole_forwards_logits(build):
    network = build()
    contexts = uneven_contexts()
    fed = torch.randint(1, SMALL["vocab_size"], (5, 6))  # past gemma's window of 4
    with torch.no_grad():
        ours = continued_logits(LlamaSteps.of(network, 5, pack=False), contexts, fed)
        theirs = plain_logits(network, contexts, fed)
    assert (ours - theirs).abs().max() < 1e-4
    # a later turn that leaves a prompt's rows out reads only the prompts continued
    some = RowContexts(contexts.prompt_ids, contexts.prompt_mask, [0, 2], contexts.suffixes[:2])
    assert ContinuedLayout.of(some, 0).prompts.tolist() == [0, 2]
    with torch.no_grad():
        ours = continued_logits(LlamaSteps.of(network, 2, pack=False), some, fed[:2])
        theirs = plain_logits(network, some, fed[:2])
    assert (ours - theirs).abs().max() < 1e-4
    # the probe's own rows agree too, longer than the sliding window
    assert continued_difference(partial(LlamaSteps.of, network, pack=False), network) < 1e-4


def test_the_layout_places_each_row_contiguously_at_the_right():
    layout = ContinuedLayout.of(uneven_contexts(), 0)
    # whole lengths 9, 13, 5, 2, 4: width 13, the last 6 columns run
    assert layout.width == 13 and layout.block_ids.shape == (5, 6)
    assert layout.real.sum(dim=1).tolist() == [9, 13, 5, 2, 4]
    assert layout.real[:, -1].all() and not layout.real[3, :11].any()
    # row 0 (prompt 0's 7 tokens, then 2): its first 3 prompt tokens are placed, at columns
    # 4-6, read from prompt columns 0-2; the other 4 and its suffix run in the block
    assert layout.sources[0, 4:].tolist() == [0, 1, 2]
    assert layout.block_positions[0].tolist() == [3, 4, 5, 6, 7, 8]


def test_a_planted_layout_bug_is_caught_and_the_whole_contexts_run(monkeypatch):
    network = small_gemma()
    contexts = uneven_contexts()
    steps = LlamaSteps.of(network, 5, pack=False)
    with torch.no_grad():
        expected = whole_contexts(LlamaSteps.of(network, 5, pack=False), contexts, 0, 2)
    shifted = ContinuedLayout.placed

    def off_by_one(self, prompt_part):  # every placed column reads its neighbour's keys
        return shifted(self, prompt_part).roll(1, dims=2)

    monkeypatch.setattr(ContinuedLayout, "placed", off_by_one)
    with torch.no_grad():
        got = steps.prefill_rows(contexts, 0, 2)
    verdict = probe.standing("continued_prefill", network)
    assert verdict is not None and not verdict.proven
    assert torch.allclose(got, expected, atol=1e-5)


def test_a_multi_turn_rollout_is_the_same_with_the_prompts_read_once(tiny_lm, monkeypatch):
    """Greedy, the tiny model writes '??' after both prompts: every row pauses there, gets the
    tool's text and goes on in a later turn, its prompt shared with its group's rows."""

    def rollout():
        tags = Tags(search_close="??", answer_close="}}")
        tool = lambda queries, prompts: ["found it"] * len(queries)  # noqa: E731
        sampler = MultiTurnSampler(HFSampler(max_completion_length=24), tool, 2, tags)
        return sampler.sample(tiny_lm, ["Q?", "Why? Q?"], 3, greedy=True)

    read_once = []
    original = ContinuedLayout.of
    monkeypatch.setattr(
        ContinuedLayout, "of", classmethod(lambda cls, *a: read_once.append(1) or original(*a))
    )
    fast = rollout()
    monkeypatch.setenv(probe.OFF_VARIABLE, "continued_prefill")
    monkeypatch.setattr(probe, "_verdicts", {})
    plain = rollout()
    assert read_once, "no later turn ran through the continued prefill"
    assert fast.inserted_mask.any(dim=1).all()  # every row searched
    assert torch.equal(fast.completion_ids, plain.completion_ids)
    assert torch.equal(fast.inserted_mask, plain.inserted_mask)
