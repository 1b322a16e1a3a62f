"""Fast path `captured_steps`: the decoding step replayed as one CUDA graph.

A decoding step of a small network is hundreds of small kernels (about 25 per layer), and on a
GPU each costs more to launch from Python than to run: the step waits on the host. A CUDA
graph records the kernels of one step once and replays them with one launch. That needs a
step whose every kernel reads and writes the same buffers each time and reads no host value,
which `StaticSteps` is: its cache, mask and write position live on the device for the whole
decoding. The first step after each `prefill` runs as it is on a side stream (it also warms the
kernels up, as capture requires), then the same call is recorded; every later step copies its
tokens and positions into the recorded inputs and replays. A prefill makes new buffers, so each
decoding records its own graph (a few milliseconds against the hundreds it saves).
"""

from __future__ import annotations

import torch
from torch import Tensor

from src.model.fast.static_steps import StaticSteps
from src.model.steps import RowContexts, whole_contexts


class CapturedSteps:
    """`Steps` through `StaticSteps` whose `step` is recorded once per decoding as a CUDA graph
    and replayed. The logits a step returns are the graph's own output tensor: read (or change)
    them before the next step, which overwrites them."""

    def __init__(self, steps: StaticSteps) -> None:
        self.steps = steps
        self.graph: torch.cuda.CUDAGraph | None = None
        self.tokens = torch.empty(0)  # the recorded step's inputs and output
        self.positions = torch.empty(0)
        self.logits = torch.empty(0)

    def prefill(
        self, prompt_ids: Tensor, prompt_mask: Tensor, group_size: int, new_tokens: int
    ) -> Tensor:
        self.graph = None  # the new cache lives elsewhere: the next step records again
        return self.steps.prefill(prompt_ids, prompt_mask, group_size, new_tokens)

    def prefill_rows(self, contexts: RowContexts, pad_token_id: int, new_tokens: int) -> Tensor:
        """Every row's whole context read as a prompt (`whole_contexts`)."""
        return whole_contexts(self, contexts, pad_token_id, new_tokens)

    def step(self, tokens: Tensor, positions: Tensor) -> Tensor:
        if self.graph is not None:
            self.tokens.copy_(tokens)
            self.positions.copy_(positions)
            self.graph.replay()
            return self.logits
        self.tokens, self.positions = tokens.clone(), positions.clone()
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):  # the real first step, which warms the kernels up
            first = self.steps.step(self.tokens, self.positions)
        torch.cuda.current_stream().wait_stream(side)
        first.record_stream(torch.cuda.current_stream())  # made on the side stream, read here
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):  # recorded, not run: the cache and `at` stay as they are
            self.logits = self.steps.step(self.tokens, self.positions)
        self.graph = graph
        return first
