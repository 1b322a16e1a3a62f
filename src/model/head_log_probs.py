"""Log-probs of chosen tokens from the final hidden states, the vocabulary projection run a
chunk of positions at a time, so that logits over the whole vocabulary never exist for every
position at once.

For N completions of T tokens the logits are N x T x V numbers: at SmolLM2's 49,152-token
vocabulary and 64 x 128 tokens, 0.8 GB in bfloat16 and 1.6 GB in float32, held from the
forward to the backward and made again as their gradient. `HeadLogSoftmax` keeps only the
hidden states [N, T, H] (which the head's own backward keeps anyway) and the log normaliser
[N, T]. Its forward projects one chunk of positions `VOCAB_BLOCK` vocabulary entries at a
time and takes the log normaliser over the blocks as an online log-sum-exp in float32 (each
block's exponentials against the largest logit so far, what was summed before rescaled when
a block raises it), so a block's logits stay in the cache; its backward projects the chunk
again, block by block, and turns the gradient of the log-probs into those of the hidden
states and of the head's weight (and bias) directly.
The price is the head's product run a second time in the backward. docs/objective.md states
the formulas: d log p(y) / d z = onehot(y) - softmax(z), over the logits z = h W^T + b
divided by the temperature.

Where only the hidden states want a gradient (LoRA or any frozen head: the common case), that
price is not paid. The gradient of a position's log-prob with respect to its hidden state,
(onehot(y) - softmax(z)) W / temperature, does not depend on the upstream gradient g (one
number per position, which only scales it), so the forward computes it per chunk, summing
exp(z_v - max) W_v over the blocks beside the normaliser, and keeps it [N, T, H] in place of
the hidden states; the backward is then g times it. The head's products are those of the full-logits path: one in the forward,
one for the gradient.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor

HEAD_CHUNK = 2**25  # positions per chunk: this many over the vocabulary's size
# vocabulary entries per block: a chunk's logits a block at a time stay in the cache
VOCAB_BLOCK = 4096


def head_log_probs(
    hidden: Tensor,
    head: Head,
    targets: Tensor,
    with_entropy: bool = False,
    chunk: int | None = None,
    mask: Tensor | None = None,
) -> tuple[Tensor, Tensor | None]:
    """Float32 log-probs [N, T] of `targets` [N, T] under the logits (hidden [N, T, H] @
    weight[V, H]^T + bias) / temperature of `head`, and the entropy of each position's
    distribution when asked (without gradient). The positions run `chunk` (default
    `HEAD_CHUNK`) over V at a time, each chunk over `VOCAB_BLOCK` vocabulary entries at a
    time: at most that many logits per position exist at once. The head's `product` makes
    the logits of a block, F.linear's arithmetic (the head's own, through oneDNN where it is
    routed there: `src.model.fast.chunked_head`).

    `mask` [N, T] (1 on the positions scored) skips the others: the padding after a short
    completion, which every loss masks out. Their log-prob and entropy are 0 and their hidden
    states get no gradient; the head runs only over the positions scored, so a batch whose
    completions end early pays for the tokens written, not for the longest row's width."""
    if mask is not None and not bool(mask.bool().all()):
        keep = mask.reshape(-1).bool()
        width = hidden.size(-1)
        logps, entropy = head_log_probs(
            hidden.reshape(-1, width)[keep].unsqueeze(0),
            head,
            targets.reshape(-1)[keep].unsqueeze(0),
            with_entropy,
            chunk,
        )
        zeros = torch.zeros(targets.numel(), dtype=torch.float32, device=hidden.device)
        spread = zeros.masked_scatter(keep, logps.reshape(-1)).view(targets.shape)
        if entropy is not None:
            entropy = zeros.masked_scatter(keep, entropy.reshape(-1)).view(targets.shape)
        return spread, entropy
    positions = max(1, (chunk or HEAD_CHUNK) // head.weight.size(0))
    reading = Reading(head.temperature, positions, with_entropy, head.product)
    logps, _, entropy = HeadLogSoftmax.apply(hidden, head.weight, head.bias, targets, reading)
    return logps, entropy if with_entropy else None


@dataclass(frozen=True)
class Reading:
    """How `HeadLogSoftmax` reads the head: the logits' `temperature`, `positions` positions
    at a time, the entropy too or not, and the `product` making each block's logits."""

    temperature: float
    positions: int
    with_entropy: bool
    product: Callable[[Tensor, Tensor, Tensor | None], Tensor] = F.linear


class HeadLogSoftmax(torch.autograd.Function):
    """log_softmax(z)[targets] [N, T] with z = (hidden @ weight^T + bias) / temperature, the
    log normaliser [N, T] and, when asked, the entropy [N, T] (neither differentiable), over
    `reading.positions` positions at a time. The weight and bias come as tensors of their own,
    so that autograd gives them their gradients."""

    @staticmethod
    def forward(
        ctx: Any,
        hidden: Tensor,
        weight: Tensor,
        bias: Tensor | None,
        targets: Tensor,
        reading: Reading,
    ) -> tuple[Tensor, Tensor, Tensor]:
        temperature, positions = reading.temperature, reading.positions
        with_entropy, product = reading.with_entropy, reading.product
        flat, picks = hidden.reshape(-1, hidden.size(-1)), targets.reshape(-1)
        logps = torch.empty(picks.shape, dtype=torch.float32, device=hidden.device)
        log_norm = torch.empty_like(logps)
        entropy = torch.empty_like(logps) if with_entropy else logps.new_empty(0)
        # only the hidden states want a gradient: compute it now (see the module docstring)
        eager = ctx.needs_input_grad[0] and not any(ctx.needs_input_grad[1:3])
        directions = torch.empty_like(flat) if eager else flat.new_empty(0)
        head = Head(weight, bias, temperature, product)
        for start in range(0, flat.size(0), positions):
            part = slice(start, start + positions)
            sums = head.sums(flat[part], picks[part], with_entropy, eager)
            log_norm[part] = sums.log_norm
            logps[part] = sums.target - sums.log_norm
            if with_entropy:  # H = log Z - sum_v softmax(z)_v z_v
                entropy[part] = sums.log_norm - sums.weighted / sums.total
            if eager:  # (onehot(y) - softmax(z)) W / T = (W_y - sum_v softmax(z)_v W_v) / T
                pulled = sums.pulled.div_(sums.total.unsqueeze(-1))
                direction = weight[picks[part]].float().sub_(pulled)
                if temperature != 1.0:
                    direction.div_(temperature)
                directions[part] = direction
        if eager:
            ctx.save_for_backward(directions)
        else:
            ctx.save_for_backward(hidden, weight, bias, targets, log_norm)
        ctx.eager, ctx.shape = eager, hidden.shape
        ctx.temperature, ctx.positions, ctx.product = temperature, positions, product
        ctx.mark_non_differentiable(log_norm, entropy)
        shape = targets.shape
        return logps.view(shape), log_norm.view(shape), entropy.view(shape if with_entropy else 0)

    @staticmethod
    def backward(ctx: Any, grad: Tensor, *_: Tensor) -> tuple[Tensor | None, ...]:
        if ctx.eager:
            (directions,) = ctx.saved_tensors
            scaled = directions.float() * grad.reshape(-1, 1).float()
            return scaled.to(directions.dtype).view(ctx.shape), *[None] * 4
        hidden, weight, bias, targets, log_norm = ctx.saved_tensors
        wants_hidden, wants_weight, wants_bias = ctx.needs_input_grad[:3]
        flat, picks = hidden.reshape(-1, hidden.size(-1)), targets.reshape(-1)
        grad = grad.reshape(-1).float()
        grad_hidden = torch.empty_like(flat) if wants_hidden else None
        grad_weight = torch.zeros_like(weight, dtype=torch.float32) if wants_weight else None
        grad_bias = torch.zeros_like(bias, dtype=torch.float32) if wants_bias else None
        head = Head(weight, bias, ctx.temperature, ctx.product)
        for start in range(0, flat.size(0), ctx.positions):
            part = slice(start, start + ctx.positions)
            rows = flat[part]
            into_hidden = torch.zeros(rows.shape, dtype=torch.float32, device=rows.device)
            g = grad[part].unsqueeze(-1)
            for block, logits in head.blocks(rows):
                # d/dz of g * log_softmax(z)[y] = g * (onehot(y) - softmax(z)), then the 1 / T;
                # float32 also from a half type's logits
                dz = torch.sub(logits, log_norm[part].unsqueeze(-1)).exp_().mul_(g.neg())
                local, inside = _in_block(picks[part], block)
                dz.scatter_add_(-1, local, torch.where(inside, g, 0.0))
                if ctx.temperature != 1.0:
                    dz.div_(ctx.temperature)
                if grad_bias is not None:
                    grad_bias[block] += dz.sum(dim=0)
                dz = dz.to(weight.dtype)  # what the head's own backward would multiply
                if grad_hidden is not None:
                    into_hidden += dz @ weight[block]
                if grad_weight is not None:
                    grad_weight[block] += (dz.t() @ rows).float()
            if grad_hidden is not None:
                grad_hidden[part] = into_hidden
        return (
            None if grad_hidden is None else grad_hidden.view_as(hidden),
            None if grad_weight is None else grad_weight.to(weight.dtype),
            None if grad_bias is None else grad_bias.to(bias.dtype),
            None,
            None,
        )


@dataclass
class Sums:
    """What one pass over the vocabulary's blocks gives for n positions, each sum taken
    relative to the running largest logit `top` [n] (the online log-sum-exp)."""

    top: Tensor  # [n] the largest logit so far
    total: Tensor  # [n] sum_v exp(z_v - top)
    target: Tensor  # [n] z_y, the target's logit
    weighted: Tensor | None = None  # [n] sum_v exp(z_v - top) z_v (for the entropy)
    pulled: Tensor | None = None  # [n, H] sum_v exp(z_v - top) W_v (for the gradient)

    @property
    def log_norm(self) -> Tensor:
        """log Z = log sum_v exp(z_v) = top + log total."""
        return self.top + self.total.log()


@dataclass(frozen=True)
class Head:
    """The vocabulary head: logits z = (h W^T + b) / temperature, made `VOCAB_BLOCK`
    vocabulary entries at a time, `product` making each block's h W^T + b."""

    weight: Tensor
    bias: Tensor | None = None
    temperature: float = 1.0
    product: Callable[[Tensor, Tensor, Tensor | None], Tensor] = F.linear

    def blocks(self, rows: Tensor) -> Iterator[tuple[slice, Tensor]]:
        """(vocabulary slice, logits [n, block]) of each block for hidden states [n, H]: the
        product's own type where the temperature is 1 (a half type is widened where it is
        used), float32 divided by the temperature elsewhere."""
        for start in range(0, self.weight.size(0), VOCAB_BLOCK):
            block = slice(start, start + VOCAB_BLOCK)
            bias = None if self.bias is None else self.bias[block]
            logits = self.product(rows, self.weight[block], bias)
            if self.temperature != 1.0:
                logits = logits.float().div_(self.temperature)
            yield block, logits

    def sums(self, rows: Tensor, picks: Tensor, weighted: bool, pulled: bool) -> Sums:
        """The online log-sum-exp over the blocks for hidden states `rows` [n, H] and their
        target tokens `picks` [n]: each block's exponentials are taken against the largest
        logit so far, and what was summed before is rescaled by exp(old top - new top) when
        a block raises it. With `weighted` also sum_v exp(z_v - top) z_v, with `pulled` also
        sum_v exp(z_v - top) W_v (each block's exponentials in the weight's type, as the
        head's own backward multiplies)."""
        n = rows.size(0)
        zeros = torch.zeros(n, dtype=torch.float32, device=rows.device)
        sums = Sums(
            top=torch.full_like(zeros, -math.inf),
            total=zeros,
            target=zeros.clone(),
            weighted=zeros.clone() if weighted else None,
            pulled=rows.new_zeros(rows.shape, dtype=torch.float32) if pulled else None,
        )
        for block, logits in self.blocks(rows):
            top = torch.maximum(sums.top, logits.amax(dim=-1).float())
            rescale = torch.exp(sums.top - top)  # 0 before the first block
            mass = torch.sub(logits, top.unsqueeze(-1)).exp_()  # float32, also from a half type
            sums.total.mul_(rescale).add_(mass.sum(dim=-1))
            if sums.weighted is not None:
                sums.weighted.mul_(rescale).add_(torch.linalg.vecdot(mass, logits.float()))
            if sums.pulled is not None:
                part = mass.to(self.weight.dtype) @ self.weight[block]
                sums.pulled.mul_(rescale.unsqueeze(-1)).add_(part.float())
            local, inside = _in_block(picks, block)
            found = logits.gather(-1, local).squeeze(-1).float()
            sums.target = torch.where(inside.squeeze(-1), found, sums.target)
            sums.top = top
        return sums


def _in_block(picks: Tensor, block: slice) -> tuple[Tensor, Tensor]:
    """Each target's index within the vocabulary block [n, 1] (clamped into it) and whether
    it lies there [n, 1]."""
    local = picks - block.start
    width = block.stop - block.start
    inside = (local >= 0) & (local < width)
    return local.clamp(0, width - 1).unsqueeze(-1), inside.unsqueeze(-1)
