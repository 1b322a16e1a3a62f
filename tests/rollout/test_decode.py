"""The decoding loop: one prompt read per group, in-place cache, inverse-CDF draws; held to
transformers' `generate`."""

from types import SimpleNamespace

import pytest
import torch
from transformers import DynamicCache

from src.model.causal_lm import CausalLM
from src.model.hf_cache import CACHE
from src.model.steps import ModuleSteps
from src.rollout.decode import Ending, Sampling, decode, draw
from src.rollout.hf import HFSampler

PROMPTS = ["What is 12 + 30?\nAnswer:", "Hi", "A longer prompt, left-padded less."]


def encoded(lm: CausalLM) -> tuple[torch.Tensor, torch.Tensor]:
    batch = lm.encode_prompts(PROMPTS)
    return batch["input_ids"], batch["attention_mask"]


def run(lm: CausalLM, sampling: Sampling, group_size: int = 2, new: int = 12) -> torch.Tensor:
    ids, mask = encoded(lm)
    lm.network.eval()
    try:
        return decode(
            ModuleSteps(lm.network, lm.keeps_few_logits, make_room=True),
            ids,
            mask,
            group_size,
            sampling,
            Ending(new, lm.eos_token_ids, lm.tokenizer.pad_token_id),
        ).tokens
    finally:
        lm.network.train()


def test_greedy_decoding_matches_generate(tiny_lm: CausalLM) -> None:
    ids, mask = encoded(tiny_lm)
    tiny_lm.network.eval()
    expected = tiny_lm.network.generate(
        input_ids=ids.repeat_interleave(2, dim=0),
        attention_mask=mask.repeat_interleave(2, dim=0),
        max_new_tokens=12,
        do_sample=False,
        eos_token_id=tiny_lm.eos_token_ids,
        pad_token_id=tiny_lm.tokenizer.pad_token_id,
    )[:, ids.size(1) :]
    tiny_lm.network.train()
    assert torch.equal(run(tiny_lm, Sampling(greedy=True)), expected)


def test_top_k_one_samples_the_greedy_tokens(tiny_lm: CausalLM) -> None:
    torch.manual_seed(3)
    sampled = run(tiny_lm, Sampling(top_k=1, temperature=0.7, repetition_penalty=1.0))
    assert torch.equal(sampled, run(tiny_lm, Sampling(greedy=True)))


def test_sampling_repeats_under_the_same_seed_and_varies_within_a_group(tiny_lm: CausalLM) -> None:
    torch.manual_seed(0)
    first = run(tiny_lm, Sampling(), group_size=4)
    torch.manual_seed(0)
    assert torch.equal(first, run(tiny_lm, Sampling(), group_size=4))
    assert not torch.equal(first[0], first[1])  # copies of one prompt draw their own tokens


def test_draw_follows_the_softmax_and_never_picks_a_masked_token() -> None:
    scores = torch.tensor([[0.0, 1.0, 2.0, -float("inf"), 0.5]]).expand(40_000, -1)
    generator = torch.Generator().manual_seed(0)
    counts = torch.bincount(draw(scores, generator), minlength=5).double() / 40_000
    expected = torch.softmax(scores[0].double(), dim=0)
    assert counts[3] == 0
    assert torch.allclose(counts, expected, atol=0.01)


class EndsAfter(torch.nn.Module):
    """A stand-in network over 6 tokens whose favourite is token 5 (EOS) from the third
    position of each row on, and token 2 before."""

    def __init__(self, prompt_length: int) -> None:
        super().__init__()
        self.prompt_length = prompt_length

    def forward(self, input_ids, attention_mask, position_ids, **kwargs):
        logits = torch.zeros(*input_ids.shape, 6)
        late = position_ids > self.prompt_length
        logits[..., 2] = 5.0
        logits[..., 5] = torch.where(late, 10.0, 0.0)
        cache = kwargs.get(CACHE) or DynamicCache()  # the installed transformers' name
        return SimpleNamespace(logits=logits, **{CACHE: cache})


def test_decoding_stops_when_every_row_has_ended_and_pads_after_eos() -> None:
    ids, mask = torch.ones(2, 3, dtype=torch.long), torch.ones(2, 3, dtype=torch.long)
    tokens = decode(
        ModuleSteps(EndsAfter(3)), ids, mask, 2, Sampling(greedy=True), Ending(10, [5], 0)
    ).tokens
    assert tokens.tolist() == [[2, 2, 5]] * 4


def test_a_stop_ends_rows_as_eos_would_and_the_loop_when_all_have_ended() -> None:
    """Row r stops once it has drawn r + 2 tokens: pad follows, and the loop ends at the
    last row's stop, before any EOS (the stand-in network writes EOS as its 10th token)."""
    ids, mask = torch.ones(1, 3, dtype=torch.long), torch.ones(1, 3, dtype=torch.long)
    asked: list[list[bool]] = []

    def stop(drawn: torch.Tensor, going: torch.Tensor) -> torch.Tensor:
        asked.append(going.tolist())
        return torch.tensor([drawn.size(1) >= row + 2 for row in range(drawn.size(0))])

    tokens = decode(
        ModuleSteps(EndsAfter(10)), ids, mask, 2, Sampling(greedy=True), Ending(12, [5], 0)
    ).tokens
    assert tokens.tolist() == [[2] * 9 + [5]] * 2
    tokens = decode(
        ModuleSteps(EndsAfter(10)), ids, mask, 2, Sampling(greedy=True), Ending(12, [5], 0, stop)
    ).tokens
    assert tokens.tolist() == [[2, 2, 0], [2, 2, 2]]
    assert asked == [[True, True], [True, True], [False, True]]  # only rows still going


@pytest.mark.parametrize("forced", [4, 10])
def test_min_new_tokens_suppresses_eos(forced: int) -> None:
    ids, mask = torch.ones(1, 3, dtype=torch.long), torch.ones(1, 3, dtype=torch.long)
    tokens = decode(
        ModuleSteps(EndsAfter(3)),
        ids,
        mask,
        1,
        Sampling(greedy=True, min_new_tokens=forced),
        Ending(10, [5], 0),
    ).tokens
    assert tokens[0, :forced].tolist() == [2] * forced
    assert tokens.size(1) == min(forced + 1, 10)


def test_sampler_forces_the_completion_length(tiny_lm: CausalLM) -> None:
    sampler = HFSampler(max_completion_length=9, min_completion_length=9)
    rollout = sampler.sample(tiny_lm, PROMPTS, group_size=2)
    assert rollout.lengths.tolist() == [9] * 6
    with pytest.raises(ValueError, match="min_completion_length"):
        HFSampler(max_completion_length=4, min_completion_length=5)


@pytest.mark.parametrize("every", [2, 4, 16])
@pytest.mark.parametrize("forced", [0, 5])
def test_asking_whether_rows_ended_less_often_returns_the_same_tokens(
    every: int, forced: int
) -> None:
    """On a GPU the loop asks every few tokens whether all rows have ended; what it drew past
    the end is cut, so the tokens equal those of asking after every token."""
    ids, mask = torch.ones(2, 3, dtype=torch.long), torch.ones(2, 3, dtype=torch.long)
    sampling = Sampling(greedy=True, min_new_tokens=forced)
    steps = ModuleSteps(EndsAfter(3))
    each = decode(steps, ids, mask, 2, sampling, Ending(12, [5], 0, check_every=1)).tokens
    fewer = decode(
        ModuleSteps(EndsAfter(3)), ids, mask, 2, sampling, Ending(12, [5], 0, check_every=every)
    ).tokens
    assert each.size(1) == (3 if forced == 0 else forced + 1)
    assert torch.equal(each, fewer)


def test_rows_that_never_end_keep_every_token_when_asked_less_often(tiny_lm: CausalLM) -> None:
    torch.manual_seed(5)
    each = run(tiny_lm, Sampling(min_new_tokens=12), new=12)
    ids, mask = encoded(tiny_lm)
    torch.manual_seed(5)
    tiny_lm.network.eval()
    try:
        fewer = decode(
            ModuleSteps(tiny_lm.network, tiny_lm.keeps_few_logits),
            ids,
            mask,
            2,
            Sampling(min_new_tokens=12),
            Ending(12, tiny_lm.eos_token_ids, tiny_lm.tokenizer.pad_token_id, check_every=5),
        ).tokens
    finally:
        tiny_lm.network.train()
    assert each.shape == fewer.shape == (6, 12)
    assert torch.equal(each, fewer)


@pytest.mark.parametrize("blocks", [3, 1])
def test_the_two_level_draw_picks_the_one_level_inverse_cdfs_token(blocks: int) -> None:
    """Over three blocks (the last padded), for the same uniform numbers, the token of one
    float64 cumulative sum over the whole vocabulary; masked tokens at a block's edges never.
    A vocabulary within one block (the tiny model's 259 entries) draws the same way."""
    from src.rollout import decode as decoding

    generator = torch.Generator().manual_seed(3)
    vocabulary = (blocks - 1) * decoding.DRAW_BLOCK + 300
    scores = torch.randn(500, vocabulary, generator=generator) * 3
    edges = [decoding.DRAW_BLOCK - 1, decoding.DRAW_BLOCK] if blocks > 1 else [150]
    masked = [0, *edges, vocabulary - 1]
    scores[:, masked] = -float("inf")
    ours = draw(scores, torch.Generator().manual_seed(7))
    u = torch.rand(500, 1, dtype=torch.float64, generator=torch.Generator().manual_seed(7))
    cdf = torch.softmax(scores.double(), dim=-1).cumsum(dim=-1)
    expected = torch.searchsorted(cdf, u * cdf[:, -1:], right=True).squeeze(1)
    assert torch.equal(ours, expected)
    assert not torch.isin(ours, torch.tensor(masked)).any()
    assert len(set((ours // decoding.DRAW_BLOCK).tolist())) == blocks  # every block is reached


def test_bfloat16_scores_draw_the_tokens_and_log_probs_of_their_float32_widening() -> None:
    """Half-type scores given to the draw itself draw the same tokens and log-probs as the
    float32 copy of the same numbers, and are left as they were (only float32 scores are the
    draw's to overwrite)."""
    from src.rollout.decode import drawn_with_log_probs

    generator = torch.Generator().manual_seed(5)
    scores = (torch.randn(64, 3000, generator=generator) * 4).bfloat16()
    kept = scores.clone()
    tokens, log_probs = drawn_with_log_probs(scores, torch.Generator().manual_seed(9), True)
    wide, wide_log_probs = drawn_with_log_probs(scores.float(), torch.Generator().manual_seed(9))
    assert torch.equal(scores, kept) and log_probs.dtype == torch.float32
    assert torch.equal(tokens, wide) and torch.equal(log_probs, wide_log_probs)


class FixedLogits:
    """Steps over a vocabulary of 3000 whose logits at each step are fixed random numbers
    of `dtype`, whatever was drawn."""

    def __init__(self, dtype: torch.dtype) -> None:
        generator = torch.Generator().manual_seed(4)
        self.table = (torch.randn(8, 4, 3000, generator=generator) * 3).bfloat16().to(dtype)
        self.at = 0

    def prefill(self, prompt_ids, prompt_mask, group_size, new_tokens):
        self.at = 0
        return self.table[0, : prompt_ids.size(0)]

    def step(self, tokens, positions):
        self.at += 1
        return self.table[self.at].clone()


def test_half_type_logits_decode_as_their_float32_widening_through_one_kept_buffer() -> None:
    """The loop widens a half type's logits into one float32 buffer kept across its steps:
    the tokens and log-probs of decoding the same numbers in float32."""
    from src.rollout.decode import Widened

    ids, mask = torch.ones(2, 3, dtype=torch.long), torch.ones(2, 3, dtype=torch.long)
    drawn = {}
    for dtype in (torch.bfloat16, torch.float32):
        torch.manual_seed(11)
        drawn[dtype] = decode(FixedLogits(dtype), ids, mask, 2, Sampling(), Ending(6, [2999], 0))
    assert torch.equal(drawn[torch.bfloat16].tokens, drawn[torch.float32].tokens)
    assert torch.equal(drawn[torch.bfloat16].log_probs, drawn[torch.float32].log_probs)
    widened = Widened()
    half = FixedLogits(torch.bfloat16).table
    first, second = widened(half[1]), widened(half[2])
    assert first is second and first.dtype == torch.float32  # one buffer, filled again
    assert torch.equal(second, half[2].float())
    wide = half[3].float()
    assert widened(wide) is wide  # float32 logits are the loop's own: no copy
