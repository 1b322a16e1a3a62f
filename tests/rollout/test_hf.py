"""Completion masks, clipping and grouping of the transformers sampler."""

import torch

from src.rollout.hf import HFSampler
from src.rollout.rollout import completion_mask


def test_mask_ends_at_first_eos_and_keeps_it():
    eos = 9
    ids = torch.tensor([[5, 9, 9, 0], [5, 6, 7, 8], [9, 1, 9, 1]])
    mask, clipped = completion_mask(ids, eos)
    assert mask.tolist() == [[1, 1, 0, 0], [1, 1, 1, 1], [1, 0, 0, 0]]
    assert clipped.tolist() == [False, True, False]


def test_mask_accepts_several_eos_ids():
    mask, clipped = completion_mask(torch.tensor([[1, 4, 2], [3, 3, 3]]), [4, 7])
    assert mask.tolist() == [[1, 1, 0], [1, 1, 1]]
    assert clipped.tolist() == [False, True]


def test_sampler_groups_completions_and_respects_the_length_limit(tiny_lm):
    sampler = HFSampler(max_completion_length=5, temperature=1.0)
    torch.manual_seed(0)
    rollout = sampler.sample(tiny_lm, ["What is 1 + 2?\nAnswer:", "Hi"], group_size=3)
    assert rollout.completion_ids.shape[0] == 6 and rollout.completion_ids.shape[1] <= 5
    assert len(rollout.completions) == 6
    # Rows i*G .. i*G+G-1 share prompt i; the shorter prompt is left-padded.
    assert torch.equal(rollout.prompt_ids[0], rollout.prompt_ids[2])
    assert rollout.prompt_mask[3:, 0].eq(0).all() and rollout.prompt_mask[:3].eq(1).all()
    # Nothing after the first EOS is counted; padding replaces it.
    pad = tiny_lm.tokenizer.pad_token_id
    assert rollout.completion_ids[rollout.completion_mask == 0].eq(pad).all()
    for row, clipped, length in zip(
        rollout.completion_ids, rollout.is_clipped, rollout.lengths, strict=True
    ):
        if clipped:
            assert length == 5 and not set(row.tolist()) & set(tiny_lm.eos_token_ids)
        else:
            assert row[length - 1].item() in tiny_lm.eos_token_ids


def test_greedy_sampling_is_deterministic(tiny_lm):
    sampler = HFSampler(max_completion_length=6)
    first = sampler.sample(tiny_lm, ["What is 3 + 4?\nAnswer:"], group_size=2, greedy=True)
    second = sampler.sample(tiny_lm, ["What is 3 + 4?\nAnswer:"], group_size=2, greedy=True)
    assert first.completions[0] == first.completions[1] == second.completions[0]
