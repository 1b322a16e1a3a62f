"""The decoding loop of the hf sampler: each prompt is read once for its G completions
(`src.model.steps.Steps`), and each token is drawn with one uniform number.

`generate` would repeat every prompt G times and run the full prefill for each copy, and its
multinomial draw costs one exponential variate per vocabulary entry and row, a cost that grows
with the vocabulary. The loop below does the same sampling with G times less prefill and an
inverse-CDF draw; `tests/rollout/test_decode.py` holds it to `generate`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import Tensor
from transformers import (
    LogitsProcessorList,
    RepetitionPenaltyLogitsProcessor,
    TemperatureLogitsWarper,
    TopKLogitsWarper,
    TopPLogitsWarper,
)

from src.model.steps import RowContexts, Steps

# on a GPU, tokens drawn between two questions of whether every row has ended
ENDED_CHECK_EVERY = 16

# (tokens drawn so far [N, t], rows still going [N] bool) -> rows whose text now ends [N] bool
Stop = Callable[[Tensor, Tensor], Tensor]


@dataclass(frozen=True)
class Sampling:
    """How each next token is chosen: the sampler's settings, or greedy decoding."""

    greedy: bool = False
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = 0
    repetition_penalty: float = 1.0
    min_new_tokens: int = 0  # end-of-sequence is suppressed before this many new tokens

    def processors(self) -> LogitsProcessorList:
        """The logits processors `generate` would apply, in its order; none for greedy."""
        chain = LogitsProcessorList()
        if self.greedy:
            return chain
        if self.repetition_penalty != 1.0:
            chain.append(RepetitionPenaltyLogitsProcessor(self.repetition_penalty))
        if self.temperature != 1.0:
            chain.append(TemperatureLogitsWarper(self.temperature))
        if self.top_k > 0:
            chain.append(TopKLogitsWarper(self.top_k))
        if self.top_p < 1.0:
            chain.append(TopPLogitsWarper(self.top_p))
        return chain


@dataclass(frozen=True)
class Ending:
    """Where each row's drawing ends: after `max_new_tokens`, at its first token among
    `eos_token_ids` (`pad_token_id` follows), or where `stop` says its text is done. Whether
    every row has ended is asked every `check_every` tokens: by default after every token on
    the CPU, and every `ENDED_CHECK_EVERY` on a GPU, where each question waits for the device
    to finish what is queued."""

    max_new_tokens: int
    eos_token_ids: tuple[int, ...] | list[int]
    pad_token_id: int
    stop: Stop | None = None
    check_every: int | None = None


# vocabulary entries per block of the two-level draw
DRAW_BLOCK = 1024


def draw(
    scores: Tensor, generator: torch.Generator | None = None, overwrite: bool = False
) -> Tensor:
    """One token per row from softmax(scores) [N, V] (`drawn_with_log_probs`)."""
    return drawn_with_log_probs(scores, generator, overwrite)[0]


def drawn_with_log_probs(
    scores: Tensor, generator: torch.Generator | None = None, overwrite: bool = False
) -> tuple[Tensor, Tensor]:
    """One token per row from softmax(scores) [N, V], by inverse CDF with one uniform number
    per row, in two levels: the vocabulary is cut into blocks of `DRAW_BLOCK` entries, the
    uniform number picks a block by the cumulative sums of the block masses, then a token
    within it by that block's cumulative sums. The same token as one cumulative sum over the
    whole vocabulary in float64 (but where the uniform number falls within float32 rounding of
    a boundary), at a cost that hardly grows with it: one exponential per entry (the softmax
    unnormalised: the uniform number is scaled to the total), one float32 sum per block, and
    float64 cumulative sums over the blocks and over one block per row (Gemma's 262,144
    entries: 256 blocks); a vocabulary of one block or less takes its one cumulative sum. A
    token of probability 0 is never drawn. With `overwrite`, float32 `scores` are the draw's to
    overwrite (the decoding loop's own logits, or its `Widened` buffer): no tensor of their
    size is made; other scores are widened into a new float32 tensor. Also returns each drawn
    token's log-probability under softmax(scores), in float32, from the same exponentials and
    sums: the sampler's own log-probs, which the trainer's are compared with
    (`Drawn.log_probs`)."""
    rows, vocabulary = scores.shape
    highest = scores.amax(dim=-1, keepdim=True)
    if overwrite and scores.dtype == torch.float32:
        probs = scores.sub_(highest).exp_()  # the softmax times a constant, in place
    else:
        # a float32 copy, from any type (the subtraction widening as it goes is slower)
        probs = scores.to(torch.float32, copy=True).sub_(highest.float()).exp_()
    u = torch.rand(rows, 1, dtype=torch.float64, device=scores.device, generator=generator)
    if vocabulary <= DRAW_BLOCK:  # one block: one cumulative sum, nothing padded
        cdf = probs.double().cumsum(dim=-1)
        index = torch.searchsorted(cdf, u * cdf[:, -1:], right=True)
        token = index.clamp_(max=vocabulary - 1)
        return token.squeeze(1), _log_prob(probs, token, cdf[:, -1:])
    width = -(-vocabulary // DRAW_BLOCK) * DRAW_BLOCK
    if width != vocabulary:  # the last block padded with tokens of probability 0
        probs = torch.nn.functional.pad(probs, (0, width - vocabulary))
    blocks = probs.view(rows, width // DRAW_BLOCK, DRAW_BLOCK)
    block_cdf = blocks.sum(dim=-1).double().cumsum(dim=-1)  # [N, blocks]
    target = u * block_cdf[:, -1:]
    block = torch.searchsorted(block_cdf, target, right=True).clamp_(max=block_cdf.size(1) - 1)
    before = torch.where(
        block > 0, block_cdf.gather(1, (block - 1).clamp(min=0)), torch.zeros_like(target)
    )
    inside = blocks.gather(1, block.unsqueeze(-1).expand(-1, 1, DRAW_BLOCK)).squeeze(1)
    index = torch.searchsorted(inside.double().cumsum(dim=-1), target - before, right=True)
    token = (block * DRAW_BLOCK + index.clamp_(max=DRAW_BLOCK - 1)).clamp_(max=vocabulary - 1)
    return token.squeeze(1), _log_prob(probs, token, block_cdf[:, -1:])


def _log_prob(probs: Tensor, token: Tensor, total: Tensor) -> Tensor:
    """log(probs[token] / total) [N] in float32: `probs` the unnormalised softmax [N, V+],
    `token` and `total` [N, 1]."""
    return (probs.gather(1, token).double().log() - total.log()).squeeze(1).float()


@dataclass(frozen=True)
class Drawn:
    """What a decoding drew: the tokens [N, T] (pad after each row's end) and, when tokens
    were sampled (not greedy), each one's log-probability under the distribution it was
    drawn from [N, T] (after the sampling settings: temperature, top-k, top-p; 0 past a
    row's end)."""

    tokens: Tensor
    log_probs: Tensor | None


@torch.no_grad()
def decode(
    steps: Steps,
    prompt_ids: Tensor,
    prompt_mask: Tensor,
    group_size: int,
    sampling: Sampling,
    ending: Ending,
) -> Drawn:
    """New tokens [B * group_size, <= ending.max_new_tokens] for the B left-padded prompts,
    rows i*G .. i*G+G-1 continuing prompt i; pad after each row's first EOS. Stops when every
    row has ended. `steps` (built for B * group_size rows, over a network the caller has put in
    eval mode) read the prompts once and then one token per row at a time. The tokens drawn
    past the end are cut, so the tokens returned are the same however often the loop asks
    whether every row has ended (the random numbers drawn for them are not given back).

    `ending.stop`, asked at the same moments, ends rows as their EOS would, where what they
    drew says they are done (a multi-turn row at `</search>`): pad follows. It sees every token
    drawn, so a caller that cuts a row at its stop text gets the tokens it would get without
    `stop`; only the loop ends sooner when every row has stopped."""
    logits = steps.prefill(prompt_ids, prompt_mask, group_size, ending.max_new_tokens)
    start = Start(
        logits.repeat_interleave(group_size, dim=0),
        prompt_ids.repeat_interleave(group_size, dim=0),  # what repetition penalty reads
        prompt_mask.sum(dim=1, keepdim=True).repeat_interleave(group_size, dim=0),
    )
    return drawn_after(steps, start, sampling, ending)


@torch.no_grad()
def decode_rows(steps: Steps, contexts: RowContexts, sampling: Sampling, ending: Ending) -> Drawn:
    """New tokens [R, <= ending.max_new_tokens] after each row's context (`RowContexts`: a
    prompt shared with other rows, then the row's own tokens), as `decode` draws them after
    whole prompts; `steps` (built for R rows) read each shared prompt once where they can
    (`Steps.prefill_rows`)."""
    ids, mask = contexts.full(ending.pad_token_id)
    start = Start(
        steps.prefill_rows(contexts, ending.pad_token_id, ending.max_new_tokens),
        ids,
        mask.sum(dim=1, keepdim=True),
    )
    return drawn_after(steps, start, sampling, ending)


@dataclass(frozen=True)
class Start:
    """Where the drawing starts once the contexts are read: the logits of each row's last
    position [N, V], the tokens repetition penalty reads [N, L], each row's next position
    [N, 1]."""

    logits: Tensor
    seen: Tensor
    position: Tensor


def drawn_after(steps: Steps, start: Start, sampling: Sampling, ending: Ending) -> Drawn:
    """The decoding loop of `decode` and `decode_rows`, from `start` on."""
    logits, seen, position = start.logits, start.seen, start.position
    device = logits.device
    max_new_tokens, pad_token_id, stop = ending.max_new_tokens, ending.pad_token_id, ending.stop
    check_every = ending.check_every or (1 if device.type == "cpu" else ENDED_CHECK_EVERY)
    eos = torch.as_tensor(list(ending.eos_token_ids), device=device)
    processors = sampling.processors()
    rows = seen.size(0)
    ended = torch.zeros(rows, dtype=torch.bool, device=device)
    tokens: list[Tensor] = []
    log_probs: list[Tensor] = []
    widened = Widened()
    for step in range(max_new_tokens):
        # the processors (temperature, top-k, ...) and the draw in float32
        scores = logits if sampling.greedy and not processors else widened(logits)
        if processors:
            scores = processors(seen, scores)
        suppressed = step < sampling.min_new_tokens  # no row can end at this step
        if suppressed:
            scores.index_fill_(1, eos, -float("inf"))
        if sampling.greedy:
            chosen = scores.argmax(dim=-1)
        else:
            chosen, log_prob = drawn_with_log_probs(scores, overwrite=True)
            log_probs.append(log_prob.masked_fill(ended, 0.0))
        if not suppressed:
            chosen = chosen.masked_fill(ended, pad_token_id)
            ended |= torch.isin(chosen, eos)
        tokens.append(chosen)
        if step + 1 == max_new_tokens:
            break
        if not suppressed and (step + 1) % check_every == 0:
            if stop is not None:
                ended |= stop(torch.stack(tokens, dim=1), ~ended)
            if bool(ended.all()):
                break
        if processors:
            seen = torch.cat([seen, chosen.unsqueeze(1)], dim=1)
        logits = steps.step(chosen, position)
        position = position + 1
    drawn = torch.stack(tokens, dim=1)
    width = drawn.size(1) if check_every == 1 else ended_width(drawn, eos)
    drawn_log_probs = torch.stack(log_probs, dim=1)[:, :width] if log_probs else None
    return Drawn(drawn[:, :width], drawn_log_probs)


class Widened:
    """A half type's logits [N, V] copied into one float32 buffer kept across the decoding
    steps (float32 logits are returned as they are: the loop's own, the draw's to overwrite).
    A fresh float32 tensor a step (32 MiB for 32 rows of Gemma's vocabulary) is allocated with
    page faults each time, and a subtraction that widens as it goes takes PyTorch's unvectorised
    mixed-type loop: the two cost several times the copy, subtraction and exponentials made in
    place on one buffer (benchmarks/sampling_phase.py)."""

    def __init__(self) -> None:
        self.buffer: Tensor | None = None

    def __call__(self, logits: Tensor) -> Tensor:
        if logits.dtype == torch.float32:
            return logits
        if self.buffer is None or self.buffer.shape != logits.shape:
            self.buffer = torch.empty(logits.shape, dtype=torch.float32, device=logits.device)
        return self.buffer.copy_(logits)


def ended_width(drawn: Tensor, eos: Tensor) -> int:
    """The number of leading columns of `drawn` [N, T] up to the first at which every row has
    reached an end-of-sequence token (all of them where some row never does)."""
    ended = torch.isin(drawn, eos).cummax(dim=1).values.all(dim=0)
    first = int(ended.int().argmax())
    return first + 1 if bool(ended[first]) else drawn.size(1)
