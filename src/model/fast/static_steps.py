"""Fast path `static_steps`: the fused decoding step of `LlamaSteps` with every shape fixed for
a whole decoding, so that it can be captured once as a CUDA graph (`captured_steps`).

`LlamaSteps.step` attends over the keys written so far, a width that grows by one per token,
and counts the tokens on the host. Here the key/value cache and the attention mask keep the
width prompt + new tokens from the first step on: the position written next is a tensor on the
device (`at`), a step writes its keys and values there with `index_copy_`, opens that position
in the mask and attends over the whole width, the positions not yet written masked. Nothing
in a step reads a host value, so every step is the same sequence of kernels on the same
buffers: what a CUDA graph replays.

It serves networks of any float type on any device (the GPU path runs them in bfloat16):
norms are computed in float32 and rounded once, as the network's own RMSNorm does, rotary
tables are cast to the network's type as its attention casts them, and attention goes through
SDPA, which accumulates in float32. Like every fast path it runs only once the probe has found
its logits over a few decoding steps equal to the network's own forward
(`src.model.fast.decoding`).
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor

from src.model.fast.llama_steps import LlamaSteps
from src.model.steps import RowContexts, whole_contexts


class StaticSteps(LlamaSteps):
    """`LlamaSteps` whose `step` has fixed shapes and no host values: `prefill` the prompts,
    then `step` once per new token, at most the `new_tokens` given to `prefill`."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.at = torch.zeros(1, dtype=torch.long)  # [1]: the position the next step writes
        self.allowed = torch.zeros(0, dtype=torch.bool)  # [rows, 1, 1, width]: True attends

    @staticmethod
    def serves(weight: Tensor, dtype: torch.dtype | None = None) -> bool:
        """Any float type on any device: the path is meant for the GPU's bfloat16 networks."""
        return weight.is_floating_point()

    def prefill(
        self, prompt_ids: Tensor, prompt_mask: Tensor, group_size: int, new_tokens: int
    ) -> Tensor:
        logits = super().prefill(prompt_ids, prompt_mask, group_size, new_tokens)
        # the cache's unwritten room, read (masked) by attention, holds zeros and is closed in
        # `bias` (`LlamaSteps._cache_written`), which holds one row per (row, key/value
        # head): the first head's is the row's
        width = self.bias.size(-1)
        self.allowed = self.bias[:: self.kv_heads].view(self.rows, 1, 1, width) == 0
        self.at = torch.full((1,), self.filled, dtype=torch.long, device=prompt_ids.device)
        return logits

    def prefill_rows(self, contexts: RowContexts, pad_token_id: int, new_tokens: int) -> Tensor:
        """Every row's whole context read as a prompt (`whole_contexts`): the fixed-shape
        step's state is what `prefill` sets."""
        return whole_contexts(self, contexts, pad_token_id, new_tokens)

    @torch.inference_mode()
    def _last_hidden(self, tokens: Tensor, positions: Tensor) -> Tensor:
        """The final norm's output [rows, hidden] after `tokens` at `positions`, through every
        layer, each layer's new key and value written at position `at`, which then advances."""
        rows, heads, kv_heads, dim = self.rows, self.heads, self.kv_heads, self.head_dim
        per_kv = heads // kv_heads
        at = self.at
        width = self.allowed.size(-1)
        self.allowed.index_fill_(-1, at, True)
        columns = torch.arange(width, device=at.device)
        windowed = {  # a sliding layer's last `window` positions, from device values only
            window: self.allowed & (columns > at - window)
            for window in {layer.window for layer in self.layers if layer.window is not None}
        }
        tables = self._rotary(positions)
        hidden = self._embedded(tokens)
        rotated_width = (heads + kv_heads) * dim
        for index, layer in enumerate(self.layers):
            qkv = layer.qkv(self._normalized(hidden, layer.norm_in))
            rotated = self._queries_keys(
                layer,
                qkv[:, :rotated_width].view(rows, heads + kv_heads, dim),
                tables[layer.rotary],
            )
            keys = self.keys[index].view(rows, kv_heads, width, dim)
            values = self.values[index].view(rows, kv_heads, width, dim)
            keys.index_copy_(2, at, rotated[:, heads:].unsqueeze(2))
            values.index_copy_(2, at, qkv[:, rotated_width:].view(rows, kv_heads, 1, dim))
            # the query heads of one key/value head read it as that many query positions
            attended = F.scaled_dot_product_attention(
                rotated[:, :heads].reshape(rows, kv_heads, per_kv, dim),
                keys,
                values,
                attn_mask=self.allowed if layer.window is None else windowed[layer.window],
                scale=self.scaling,
            )
            attention = layer.out(attended.reshape(rows, heads * dim))
            hidden = hidden + self._sandwiched(attention, layer.post_attention)
            gate, up = layer.gate_up(self._normalized(hidden, layer.norm_mlp)).chunk(2, dim=1)
            hidden = hidden + self._sandwiched(
                layer.down(self.activation(gate) * up), layer.post_mlp
            )
        at.add_(1)
        return self._final_norm(hidden)
