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


def test_the_sampler_reports_the_log_probs_the_trainer_computes_in_float32(tiny_lm):
    """Each drawn token's log-prob under the distribution it was drawn from is the trainer's
    log-prob of it at the same temperature (float32: the same numbers up to rounding), 0 past
    a completion's end; greedy decoding reports none."""
    sampler = HFSampler(max_completion_length=8, temperature=0.7)
    torch.manual_seed(0)
    rollout = sampler.sample(tiny_lm, ["What is 1 + 2?\nAnswer:", "Hi"], group_size=3)
    with torch.no_grad():
        trained, _ = tiny_lm.log_probs(rollout, temperature=0.7)
    mask = rollout.completion_mask.bool()
    assert rollout.sampler_logps is not None and rollout.sampler_logps.shape == trained.shape
    assert torch.allclose(rollout.sampler_logps[mask], trained[mask], atol=1e-4)
    assert rollout.sampler_logps[~mask].eq(0).all()
    assert (rollout.sampler_logps[mask] < 0).all()
    greedy = sampler.sample(tiny_lm, ["Hi"], group_size=2, greedy=True)
    assert greedy.sampler_logps is None


def test_greedy_sampling_is_deterministic(tiny_lm):
    sampler = HFSampler(max_completion_length=6)
    first = sampler.sample(tiny_lm, ["What is 3 + 4?\nAnswer:"], group_size=2, greedy=True)
    second = sampler.sample(tiny_lm, ["What is 3 + 4?\nAnswer:"], group_size=2, greedy=True)
    assert first.completions[0] == first.completions[1] == second.completions[0]


def test_stop_strings_end_each_completion_after_the_token_that_completes_them(tiny_lm):
    """The same draws as without stops, each row cut after the first token whose text holds
    a stop string; that row ended (not clipped), the cut tokens padded and out of the mask."""
    prompts = ["What is 1 + 2?\nAnswer:", "Hi"]
    torch.manual_seed(0)
    plain = HFSampler(max_completion_length=12).sample(tiny_lm, prompts, group_size=4)
    stops = sorted({text[len(text) // 2] for text in plain.completions if len(text) > 2})[:2]
    assert stops and all(len(stop) == 1 for stop in stops)  # a byte-level model: one per token
    torch.manual_seed(0)
    cut = HFSampler(max_completion_length=12, stop_strings=stops).sample(
        tiny_lm, prompts, group_size=4
    )
    pad = tiny_lm.tokenizer.pad_token_id
    stopped = 0
    for row, text in enumerate(plain.completions):
        ends = [text.index(stop) + 1 for stop in stops if stop in text]
        if not ends:
            assert cut.completions[row] == text
            continue
        stopped += 1
        assert cut.completions[row] == text[: min(ends)]
        assert not cut.is_clipped[row]
        length = int(cut.lengths[row])
        assert cut.completion_ids[row, length:].eq(pad).all()
    assert stopped >= 2


def test_a_stop_typed_as_backslash_n_stops_at_a_line_end():
    """The sampler reads `rollout.stop_strings` as `stop_texts` does (its check is the key's
    declaration, tests/rollout/test_stop_strings.py)."""
    assert HFSampler(max_completion_length=4, stop_strings=["\\n"]).stop_strings == ["\n"]
