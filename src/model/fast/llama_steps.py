"""Fast path `fused_steps`: decoding steps of Llama-family networks without the transformers
module stack, one new token per row, through fused weights and a key/value cache of our own.

A decoding step reads one token per row, so on the CPU its cost is mostly per-operation
overhead: the module stack runs about 60 operations per layer (separate query, key and value
products, rotary embeddings from position ids, cache bookkeeping, mask building) for a few
rows. `LlamaSteps` runs the same arithmetic in about 20: the query, key and value weights are
one matrix, the gate and up weights another, the rotary tables are computed once, keys and
values are written in place into a cache sized for the whole decoding (one matrix per row and
key/value head), attention for the one new query per row is two batched products (the first
adds the padding bias) and a softmax, and each RMSNorm's weight is folded into the products
that read its output. LoRA adapters are merged into the fused weights (vanilla LoRA only, as
in `src.model.fast.packed`), and on the CPU the fused weights are packed for MKL once per
decoding where the `packed_weights` path is proven.

The prompts themselves go through the same fused products (`prefill`, not packed: their row
count is the prompts' tokens), with causal attention by SDPA, and their keys and values are
written straight into the rows that continue them, so no copy of the cache is made per row.

`prefill` and `step` run in inference mode, where an operation skips autograd's bookkeeping
(views, version counters). Only the steps' own tensors are made there, so no module buffer
becomes an inference tensor, and the logits they return come from a product outside it: a
normal tensor.

In bfloat16 (weights stored in it: a frozen base under LoRA, `src.model.precision`) the
products, the residual stream, the key/value cache and the attention run in bfloat16 as the
modules' do, with the modules' order of rounding: the RMSNorms' statistics and the
attention's softmax in float32, each norm's weight applied as its family applies it (not
folded into the products), the rotary tables rounded to bfloat16; the logits come out in
bfloat16 (the decoding loop widens them into one float32 buffer, `src.rollout.decode.Widened`).
Their products go through copies reordered once for oneDNN where `Kernels` finds that faster
here than torch's bfloat16 product.

It reads transformers' layer and rotary internals, so it serves only float32 and bfloat16 CPU
networks of the classes in `STEPPED_CLASSES` with the plain rotary embedding, in eval mode (`LlamaSteps.of`
returns None for anything else; `StaticSteps` serves other float types and devices), and
only once `fused_steps_proven` has found its logits over a few decoding steps equal to the
network's own forward (`src.model.fast.decoding`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from functools import partial

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from src.model.fast import onednn
from src.model.fast.continued_prefill import (
    ContinuedLayout,
    continued_difference,
    continued_tolerance,
)
from src.model.fast.lean_layers import GEMMA_NORMS, LEAN_NORMS, gate_activation
from src.model.fast.packed import (
    can_pack,
    decodes_through_onednn,
    merged_weight,
    packed_product,
    smallest_packed,
)
from src.model.fast.probe import computed_dtype, proven
from src.model.positions import position_ids
from src.model.steps import RowContexts, whole_contexts

# causal LM classes whose decoder layers are pre-norm RMSNorm, rotary attention and a SiLU
# gated MLP, with biases (if any) only on the linear layers
STEPPED_CLASSES = frozenset({"LlamaForCausalLM", "Qwen2ForCausalLM"})
# causal LM classes of the Gemma 3 family, read by `_gemma_parts`
GEMMA_CLASSES = frozenset({"Gemma3ForCausalLM"})
# Gemma 3's rotary module: one inverse-frequency table per layer type
GEMMA_ROTARIES = frozenset({"Gemma3RotaryEmbedding"})
# `hidden_activation` names of GELU with the tanh approximation
TANH_GELUS = frozenset({"gelu_pytorch_tanh"})
# a decoding step reads a group's shared prompt columns once for its G rows
# (`_grouped_attention`) from this many columns on; below it, row by row (fewer operations a
# step: on short prompts they cost more than the cache they spare, docs/performance.md)
GROUPED_FROM = 128
# a decoding step reads its key/value room whole, the columns not yet written closed, once the
# written ones are at least this share of it: the rows' columns then lie end to end in memory,
# which the processor streams several times faster than the same rows' written columns with
# gaps between them (docs/performance.md)
READ_WHOLE_FROM = 0.5


@dataclass(frozen=True)
class Kernels:
    """How a stepped network's products run: in `dtype` (the type the network computes in:
    its weights', or autocast's where that is on, `computed_dtype`); `pack`, through copies
    packed for MKL where that is worth it (`src.model.fast.packed`, float32 only); `onednn`,
    through copies reordered for oneDNN instead, where that is faster here for decoding at the
    network's widths (`decodes_through_onednn`, float32 and bfloat16)."""

    pack: bool
    onednn: bool
    dtype: torch.dtype = torch.float32

    @classmethod
    def of(cls, network: nn.Module, pack: bool) -> Kernels:
        """The kernels for `network`: in float32, packing where `pack`, through oneDNN where
        that is usable; in bfloat16, packing where `pack` and oneDNN's reordered copies are
        faster than torch's bfloat16 product (MKL packs no half type); never in other types."""
        dtype = computed_dtype(network)
        if dtype == torch.float32:
            return cls(pack, pack and decodes_through_onednn(network), dtype)
        reordered = pack and dtype == torch.bfloat16 and decodes_through_onednn(network, dtype)
        return cls(reordered, reordered, dtype)


class Product:
    """x -> x @ weight.T + bias: called, for batches of exactly the steps' `rows` rows
    (through a copy packed for MKL when that is worth it, or reordered for oneDNN, as
    `kernels` say); `any`, for any number of rows (the prompts)."""

    def __init__(self, weight: Tensor, bias: Tensor | None, rows: int, kernels: Kernels) -> None:
        self.weight = weight
        self.bias = None if bias is None else bias.detach()
        smallest = smallest_packed(kernels.onednn)
        worth = kernels.pack and can_pack(rows) and weight.numel() >= smallest
        self._packed = packed_product(weight, self.bias, rows, kernels.onednn) if worth else None
        # the prompts' products through oneDNN where it is faster here, on the reordered copy
        # (it takes any number of rows) where there is one
        cpu32 = weight.dtype == torch.float32 and weight.device.type == "cpu"
        if kernels.onednn and self._packed is not None:
            self._any = self._packed
        elif kernels.onednn and cpu32:
            self._any = partial(onednn.product, weight=weight, bias=self.bias)
        else:
            self._any = partial(F.linear, weight=weight, bias=self.bias)

    @property
    def packed(self) -> bool:
        """Whether batches of `rows` rows go through the packed copy."""
        return self._packed is not None

    def __call__(self, x: Tensor) -> Tensor:
        if self._packed is not None:
            return self._packed(x)
        return F.linear(x, self.weight, self.bias)

    def any(self, x: Tensor) -> Tensor:
        """The product for a batch of any number of rows."""
        return self._any(x)


@dataclass
class _Layer:
    qkv: Product  # normalised hidden -> queries, keys, values (input RMSNorm weight folded in)
    out: Product  # attention output -> hidden
    gate_up: Product  # normalised hidden -> gate, up (pre-MLP RMSNorm weight folded in)
    down: Product  # MLP width -> hidden
    # Gemma 3 only (None elsewhere): the query and key heads' RMSNorm weights side by side
    # [heads + kv_heads, head_dim], and the RMSNorm weights on the attention's and the MLP's
    # outputs before each residual sum ("sandwich" norms)
    qk_norm: Tensor | None = None
    post_attention: Tensor | None = None
    post_mlp: Tensor | None = None
    rotary: int = 0  # which of the steps' rotary tables the layer's positions use
    window: int | None = None  # a sliding-window layer: it attends to this many last positions
    # in a half type, the RMSNorm weights before attention and before the MLP (Gemma's 1 + w
    # in float32), applied as the modules apply them; None in float32, where qkv and gate_up
    # carry them folded in
    norm_in: Tensor | None = None
    norm_mlp: Tensor | None = None


@dataclass
class _Parts:
    """What the steps read of a network besides its layers, per family."""

    layers: list[_Layer]
    lm_head: Product
    norm_final: Tensor  # the final RMSNorm's effective weight (Gemma's 1 + w)
    rotaries: list[tuple[Tensor, float]]  # per rotary table: inverse frequencies and scale
    activation: Callable[[Tensor], Tensor]  # of the gate: SiLU, or Gemma's tanh GELU
    embed_scale: Tensor | None = None  # Gemma: the embeddings times sqrt(hidden), rounded
    weight_in_float32: bool = False  # the final norm multiplies its weight before rounding


class LlamaSteps:
    """One decoding step of `rows` rows at a time for a supported network (`of`): `prefill`
    the prompts, then `step` once per new token."""

    def __init__(self, network: nn.Module, parts: _Parts, rows: int):
        config = network.config
        self.rows = rows
        self.heads = config.num_attention_heads
        self.kv_heads = config.num_key_value_heads or self.heads
        self.head_dim = getattr(config, "head_dim", None) or config.hidden_size // self.heads
        self.eps = config.rms_norm_eps
        self.layers = parts.layers
        self.dtype = parts.lm_head.weight.dtype  # what the products, stream and cache hold
        inner = network.model
        self.embed = inner.embed_tokens.weight.detach().to(self.dtype)
        self.embed_scale = None if parts.embed_scale is None else parts.embed_scale.to(self.dtype)
        # Llama's final norm multiplies its weight in the stream's type, Gemma's in float32
        self.norm_final = parts.norm_final.to(
            torch.float32 if parts.weight_in_float32 else self.dtype
        )
        self.final_in_float32 = parts.weight_in_float32
        self.lm_head = parts.lm_head
        self.rotaries = parts.rotaries
        self.activation = parts.activation
        self.scaling = inner.layers[0].self_attn.scaling
        # per layer, keys and values [rows * kv_heads, width, head_dim]: one matrix per row
        # and key/value head
        self.keys: list[Tensor] = []
        self.values: list[Tensor] = []
        self.bias = torch.empty(0)  # [rows * kv_heads, 1, width]: 0, or -inf on padding
        self.filled = 0
        # what `prefill` read: B prompts of G rows each, `prompt_width` columns of the cache
        self.prompts, self.group, self.prompt_width = 0, 1, 0
        self.network = network  # what the continued prefill's proof is keyed on
        self.remade: Callable[[int], LlamaSteps | None] = lambda rows: None  # set by `of`

    @classmethod
    def of(cls, network: nn.Module, rows: int, pack: bool = True) -> LlamaSteps | None:
        """Steps for `network` (a causal LM, or a peft model over one) at `rows` rows, its
        large products packed for MKL when `pack` (and worth it), or None when it is not an
        eval-mode network of `STEPPED_CLASSES` or `GEMMA_CLASSES`, of a type and on a device
        that `serves` takes, with plain rotary embeddings, plain RMSNorms, SiLU MLPs (tanh
        GELU for Gemma 3), and linear layers that are `nn.Linear` or vanilla LoRA over one."""
        base = network.get_base_model() if hasattr(network, "get_base_model") else network
        weight = base.get_input_embeddings().weight
        if network.training or not cls.serves(weight, computed_dtype(network)):
            return None
        name = type(base).__name__
        kernels = Kernels.of(base, pack)
        if name in STEPPED_CLASSES:
            parts = _llama_parts(base, rows, kernels)
        elif name in GEMMA_CLASSES:
            parts = _gemma_parts(base, rows, kernels)
        else:
            return None
        if parts is None:
            return None
        steps = cls(base, parts, rows)
        steps.remade = partial(cls.of, network, pack=False)  # the probe's: nothing packed
        return steps

    @staticmethod
    def serves(weight: Tensor, dtype: torch.dtype | None = None) -> bool:
        """Whether networks with weights like `weight`, computing in `dtype` (the weights'
        by default), are stepped: float32 or bfloat16 weights on the CPU computing in their
        own type, where per-operation overhead and reading the weights are what a step
        costs. float32 weights under bfloat16 autocast (every weight trained) are not: their
        modules keep a float32 residual stream, which the steps' products do not."""
        dtype = dtype or weight.dtype
        served = dtype in (torch.float32, torch.bfloat16) and dtype == weight.dtype
        return served and weight.device.type == "cpu"

    def packed_products(self) -> list[Product]:
        """One packed product of each distinct shape (weight, bias or not): what the probe of
        the packed steps compares with torch's public product."""
        found: dict[tuple[tuple[int, ...], bool], Product] = {}
        products = [p for layer in self.layers for p in (layer.qkv, layer.out, layer.gate_up)]
        products += [layer.down for layer in self.layers] + [self.lm_head]
        for product in products:
            if product.packed:
                found.setdefault((tuple(product.weight.shape), product.bias is not None), product)
        return list(found.values())

    def prefill(
        self, prompt_ids: Tensor, prompt_mask: Tensor, group_size: int, new_tokens: int
    ) -> Tensor:
        """Read the B left-padded prompts [B, P], rows i*G .. i*G+G-1 continuing prompt i,
        with room for `new_tokens` more positions. Returns the logits [B, V] of each prompt's
        last position (they predict its first new token)."""
        return self.lm_head.any(
            self._prompt_hidden(prompt_ids, prompt_mask, group_size, new_tokens)
        )

    @torch.inference_mode()
    def _prompt_hidden(
        self, prompt_ids: Tensor, prompt_mask: Tensor, group_size: int, new_tokens: int
    ) -> Tensor:
        """The final norm's output [B, hidden] at each prompt's last position, writing every
        layer's keys and values into the cache of the prompt's G rows."""
        prompts, filled = prompt_ids.shape
        kv_heads, dim = self.kv_heads, self.head_dim
        width = filled + new_tokens
        real = prompt_mask.bool()
        hidden, written = self._block(
            self._embedded(prompt_ids),
            self._rotary(position_ids(prompt_mask).unsqueeze(-1)),  # [B, P, 1, dim] each
            real,
        )
        self.keys, self.values = [], []
        for layer_written in written:
            for source, target in zip(layer_written, (self.keys, self.values), strict=True):
                room = source.new_empty(self.rows * kv_heads, width, dim)  # each row a copy
                room.view(prompts, group_size, kv_heads, width, dim)[..., :filled, :] = (
                    source.unsqueeze(1)
                )
                target.append(room)
        self._cache_written(real, width, group_size * kv_heads)
        self.filled = filled
        self.prompts, self.group, self.prompt_width = prompts, group_size, filled
        return self._final_norm(hidden[:, -1])

    def _block(
        self,
        hidden: Tensor,
        tables: list[tuple[Tensor, Tensor]],
        real: Tensor,
        past: list[tuple[Tensor, Tensor]] | None = None,
    ) -> tuple[Tensor, list[tuple[Tensor, Tensor]]]:
        """Every layer over a block of S positions of N rows (`hidden` [N, S, width], rotary
        `tables` at their positions), after `past` (per layer, keys and values [N, kv_heads,
        C, head_dim] of the C columns before the block; none: the block starts the rows).
        `real` [N, C + S] says which columns hold tokens; a row's tokens are contiguous, so a
        sliding layer's window in columns is its window in positions. Returns the block's
        final hidden states and, per layer, its keys and values [N, kv_heads, S, head_dim]."""
        rows, size = hidden.shape[:2]
        heads, kv_heads, dim = self.heads, self.kv_heads, self.head_dim
        allowed, windowed = block_masks(real, size, self.layers)
        rotated_width = (heads + kv_heads) * dim
        written = []
        for index, layer in enumerate(self.layers):
            qkv = layer.qkv.any(self._normalized(hidden, layer.norm_in))
            rotated = self._queries_keys(
                layer,
                qkv[..., :rotated_width].view(rows, size, heads + kv_heads, dim),
                tables[layer.rotary],
            )
            query = rotated[:, :, :heads].transpose(1, 2)  # [N, heads, S, head_dim]
            key = rotated[:, :, heads:].transpose(1, 2)  # [N, kv_heads, S, head_dim]
            value = qkv[..., rotated_width:].view(rows, size, kv_heads, dim).transpose(1, 2)
            written.append((key, value))
            if past is not None:
                key = torch.cat([past[index][0], key], dim=2)
                value = torch.cat([past[index][1], value], dim=2)
            attended = F.scaled_dot_product_attention(
                query,
                key,
                value,
                attn_mask=allowed if layer.window is None else windowed[layer.window],
                scale=self.scaling,
                enable_gqa=heads != kv_heads,
            )  # a padding position's output is never read: its keys are masked for the others
            attention = layer.out.any(attended.transpose(1, 2).reshape(rows, size, heads * dim))
            hidden = hidden + self._sandwiched(attention, layer.post_attention)
            gate, up = layer.gate_up.any(self._normalized(hidden, layer.norm_mlp)).chunk(2, dim=-1)
            mlp = layer.down.any(self.activation(gate) * up)
            hidden = hidden + self._sandwiched(mlp, layer.post_mlp)
        return hidden, written

    def prefill_rows(self, contexts: RowContexts, pad_token_id: int, new_tokens: int) -> Tensor:
        """Read rows that continue shared prompts (`RowContexts`): each prompt once, then each
        row's own tokens after it (`src.model.fast.continued_prefill`), where that is proven on
        this network; otherwise every row's whole context (`whole_contexts`). Returns the
        float32 logits [R, V] of each row's last position."""
        check = partial(continued_difference, self.remade, self.network)
        tolerance = continued_tolerance(self.remade, self.network)
        if not proven("continued_prefill", self.network, check, tolerance):
            return whole_contexts(self, contexts, pad_token_id, new_tokens)
        return self.continued_prefill(contexts, pad_token_id, new_tokens)

    def continued_prefill(
        self, contexts: RowContexts, pad_token_id: int, new_tokens: int
    ) -> Tensor:
        """`prefill_rows` through `src.model.fast.continued_prefill`, unprobed (the probe
        runs it)."""
        return self.lm_head.any(self._continued_hidden(contexts, pad_token_id, new_tokens))

    @torch.inference_mode()
    def _continued_hidden(
        self, contexts: RowContexts, pad_token_id: int, new_tokens: int
    ) -> Tensor:
        """The final norm's output [R, hidden] at each row's last position, writing every
        layer's keys and values into the cache: the prompts' through one pass over those some
        row continues, placed in each row's columns, then the rows' own through a pass over their
        last columns (`ContinuedLayout`)."""
        if len(contexts.owners) != self.rows:
            raise ValueError(f"{len(contexts.owners)} rows given to steps for {self.rows}")
        layout = ContinuedLayout.of(contexts, pad_token_id)
        prompt_ids = contexts.prompt_ids[layout.prompts]
        prompt_mask = contexts.prompt_mask[layout.prompts]
        _, prompt_written = self._block(
            self._embedded(prompt_ids),
            self._rotary(position_ids(prompt_mask).unsqueeze(-1)),
            prompt_mask.bool(),
        )
        past = [tuple(layout.placed(t) for t in kv) for kv in prompt_written]
        hidden, written = self._block(
            self._embedded(layout.block_ids),
            self._rotary(layout.block_positions.unsqueeze(-1)),
            layout.real,
            past,
        )
        width = layout.width + new_tokens
        self.keys, self.values = [], []
        for before, now in zip(past, written, strict=True):
            for old, new, target in zip(before, now, (self.keys, self.values), strict=True):
                room = new.new_empty(self.rows * self.kv_heads, width, self.head_dim)
                view = room.view(self.rows, self.kv_heads, width, self.head_dim)
                view[:, :, : old.size(2)] = old
                view[:, :, old.size(2) : layout.width] = new
                target.append(room)
        self._cache_written(layout.real, width, self.kv_heads)
        self.filled = layout.width
        self.prompts, self.group, self.prompt_width = self.rows, 1, 0
        return self._final_norm(hidden[:, -1])

    def step(self, tokens: Tensor, positions: Tensor) -> Tensor:
        """Logits [rows, V] after `tokens` [rows] at `positions` [rows, 1]."""
        # the last product runs outside inference mode, so the logits are a normal tensor
        # the caller may change in place
        return self.lm_head(self._last_hidden(tokens, positions))

    @torch.inference_mode()
    def _last_hidden(self, tokens: Tensor, positions: Tensor) -> Tensor:
        """The final norm's output [rows, hidden] after `tokens` at `positions`, through every
        layer, writing each layer's new key and value into the cache."""
        rows, heads, kv_heads, dim = self.rows, self.heads, self.kv_heads, self.head_dim
        matrices, per_kv = rows * kv_heads, heads // kv_heads
        at = self.filled
        self.filled += 1
        self.bias[..., at] = 0.0  # the column this step writes is open from now on
        tables = self._rotary(positions)
        hidden = self._embedded(tokens)
        rotated_width = (heads + kv_heads) * dim
        for index, layer in enumerate(self.layers):
            qkv = layer.qkv(self._normalized(hidden, layer.norm_in))
            # queries and keys are rotated together, then split
            rotated = self._queries_keys(
                layer,
                qkv[:, :rotated_width].view(rows, heads + kv_heads, dim),
                tables[layer.rotary],
            )
            keys, values = self.keys[index], self.values[index]
            keys.view(rows, kv_heads, -1, dim)[:, :, at] = rotated[:, heads:]
            values.view(rows, kv_heads, -1, dim)[:, :, at] = qkv[:, rotated_width:].view(
                rows, kv_heads, dim
            )
            # a sliding layer reads its last `window` positions only
            first = 0 if layer.window is None else max(0, at + 1 - layer.window)
            # the query heads of one key/value head read it as that many query positions; for
            # one query per row, batched products and a softmax are quicker than SDPA's kernel
            queries = rotated[:, :heads].reshape(matrices, per_kv, dim)
            if self.group > 1 and self.prompt_width - first >= GROUPED_FROM:
                attended = self._grouped_attention(queries, keys, values, first, at)
            else:
                end = self._read_end(first, at)
                scores = torch.baddbmm(
                    self.bias[..., first:end],
                    queries,
                    keys[:, first:end].transpose(1, 2),
                    alpha=self.scaling,
                )
                attended = torch.bmm(self._softmax(scores), values[:, first:end])
            attention = layer.out(attended.view(rows, heads * dim))
            hidden = hidden + self._sandwiched(attention, layer.post_attention)
            gate, up = layer.gate_up(self._normalized(hidden, layer.norm_mlp)).chunk(2, dim=1)
            mlp = layer.down(self.activation(gate) * up)
            hidden = hidden + self._sandwiched(mlp, layer.post_mlp)
        return self._final_norm(hidden)

    def _cache_written(self, real: Tensor, width: int, repeats: int) -> None:
        """The attention bias [N * repeats, 1, width] after a prefill wrote the first
        real.size(1) columns of every room (`real` [N, columns]: which hold tokens, each of
        the N rows' for `repeats` matrices): 0 where a column holds a token, -inf on padding
        and on the columns not yet written, which hold zeros until a step writes and opens
        them. A step that reads its room whole (`_read_end`) so reads finite numbers there,
        which weigh exactly 0 after the softmax."""
        filled = real.size(1)
        for room in (*self.keys, *self.values):
            room[:, filled:].zero_()
        bias = torch.full(
            (real.size(0), width), float("-inf"), device=real.device, dtype=self.dtype
        )
        bias[:, :filled].masked_fill_(real, 0.0)
        self.bias = bias.repeat_interleave(repeats, dim=0).unsqueeze(1)

    def _read_end(self, first: int, at: int) -> int:
        """The column after the last that a step writing column `at` reads from `first` on:
        its room's end once the columns written are at least `READ_WHOLE_FROM` of what that
        reads (the closed ones weigh 0), else `at + 1`."""
        width = self.bias.size(-1)
        return width if at + 1 - first >= READ_WHOLE_FROM * (width - first) else at + 1

    def _final_norm(self, hidden: Tensor) -> Tensor:
        """The final RMSNorm: Llama's rounds the normalised values before its weight
        multiplies them; Gemma's multiplies in float32 and rounds once (`_sandwiched`)."""
        if self.final_in_float32:
            return self._sandwiched(hidden, self.norm_final)
        return F.rms_norm(hidden, hidden.shape[-1:], self.norm_final, self.eps)

    def _grouped_attention(
        self, queries: Tensor, keys: Tensor, values: Tensor, first: int, at: int
    ) -> Tensor:
        """Attention [rows * kv_heads, per_kv, head_dim] of one new query per row over the
        cache columns first .. at, the prompt's columns read once per group: the G rows of a
        prompt hold the same prompt keys and values (`prefill` copies them), so its G x per_kv
        queries are one product with the first row's, and only the columns written since are
        read row by row. The same numbers as one product per row over all the columns, with
        a fraction of the cache read per step."""
        prompts, group, kv_heads, dim = self.prompts, self.group, self.kv_heads, self.head_dim
        width, per_kv, shared = keys.size(1), queries.size(1), self.prompt_width
        by_group = (prompts, group, kv_heads)

        def gathered(t: Tensor) -> Tensor:  # [rows * kv, per_kv, n] -> [B * kv, G * per_kv, n]
            return (
                t.view(*by_group, per_kv, -1)
                .transpose(1, 2)
                .reshape(prompts * kv_heads, group * per_kv, -1)
            )

        def spread(t: Tensor) -> Tensor:  # the inverse of `gathered`
            return (
                t.view(prompts, kv_heads, group, per_kv, -1)
                .transpose(1, 2)
                .reshape(prompts * group * kv_heads, per_kv, -1)
            )

        def prompt_part(cache: Tensor) -> Tensor:  # the first row's prompt columns [B * kv, ..]
            return cache.view(*by_group, width, -1)[:, 0, :, first:shared].reshape(
                prompts * kv_heads, shared - first, -1
            )

        bias = self.bias.view(*by_group, 1, width)[:, 0, :, :, first:shared]
        prompt_scores = torch.baddbmm(
            bias.reshape(prompts * kv_heads, 1, shared - first),
            gathered(queries),
            prompt_part(keys).transpose(1, 2),
            alpha=self.scaling,
        )
        new_scores = torch.baddbmm(
            self.bias[..., shared : at + 1],
            queries,
            keys[:, shared : at + 1].transpose(1, 2),
            alpha=self.scaling,
        )
        probs = self._softmax(torch.cat([spread(prompt_scores), new_scores], dim=-1))
        on_prompt, on_new = probs.split([shared - first, at + 1 - shared], dim=-1)
        attended = spread(torch.bmm(gathered(on_prompt.contiguous()), prompt_part(values)))
        return attended.view(-1, per_kv, dim).baddbmm_(on_new, values[:, shared : at + 1])

    def _embedded(self, tokens: Tensor) -> Tensor:
        """The tokens' embeddings, times the family's scale where it has one (Gemma)."""
        hidden = F.embedding(tokens, self.embed)
        return hidden if self.embed_scale is None else hidden * self.embed_scale

    def _queries_keys(self, layer: _Layer, qk: Tensor, table: tuple[Tensor, Tensor]) -> Tensor:
        """The query and key heads [..., heads + kv_heads, head_dim] normalised per head
        where the layer has query and key norms (Gemma 3), then rotated."""
        if layer.qk_norm is not None:
            normed = F.rms_norm(qk.float(), qk.shape[-1:], None, self.eps) * layer.qk_norm
            qk = normed.to(qk.dtype)
        return rotate(qk, *table)

    def _sandwiched(self, output: Tensor, weight: Tensor | None) -> Tensor:
        """A sublayer's output, through its RMSNorm (float32, rounded once) where the family
        puts one before the residual sum (Gemma 3)."""
        if weight is None:
            return output
        return F.rms_norm(output.float(), output.shape[-1:], weight, self.eps).to(output.dtype)

    def _normalized(self, hidden: Tensor, weight: Tensor | None = None) -> Tensor:
        """RMSNorm of `hidden` [rows, width]. Without `weight` (float32): without its weight
        and with a factor sqrt(width) left out, x / sqrt(sum(x^2) + width * eps), the products
        that read it carrying the norm's weight times sqrt(width) (`_layer`). With `weight`
        (a half type): the module's RMSNorm, statistics in float32, the weight applied in the
        family's order (`_sandwiched` for Gemma's float32 1 + w)."""
        if weight is None:
            squares = torch.linalg.vecdot(hidden, hidden).unsqueeze_(-1)
            return hidden * squares.add_(hidden.size(-1) * self.eps).rsqrt_()
        if self.final_in_float32:  # the family multiplies in float32, then rounds
            return self._sandwiched(hidden, weight)
        normed = F.rms_norm(hidden.float(), hidden.shape[-1:], None, self.eps)
        return weight * normed.to(hidden.dtype)

    def _softmax(self, scores: Tensor) -> Tensor:
        """The attention's softmax over the last dimension, in float32 for a half type and
        rounded back, as the modules' eager attention computes it."""
        if scores.dtype == torch.float32:
            return scores.softmax(dim=-1)
        return scores.softmax(dim=-1, dtype=torch.float32).to(scores.dtype)

    def _rotary(self, positions: Tensor) -> list[tuple[Tensor, Tensor]]:
        """Per rotary table, cos and sin [..., 1, head_dim] at `positions` [..., 1] ([rows, 1]
        for a step, [B, P, 1] for the prompts), as the network's rotary module computes them,
        with the first half of sin negated (what `rotate` multiplies)."""
        tables = []
        for inv_freq, scale in self.rotaries:
            freqs = positions.float() * inv_freq
            angles = torch.cat([freqs, freqs], dim=-1).unsqueeze(-2)
            cos, sin = angles.cos(), angles.sin()
            if scale != 1.0:
                cos, sin = cos * scale, sin * scale
            sin[..., : freqs.size(-1)].neg_()
            tables.append((cos.to(self.dtype), sin.to(self.dtype)))  # as the modules round them
        return tables


def block_masks(real: Tensor, size: int, layers: list[_Layer]) -> tuple[Tensor, dict[int, Tensor]]:
    """Attention masks [N, 1, S, C + S] (True attends) of a block of the last S of C + S
    columns: each position reads the real columns up to itself, a padding position only
    itself (so that its never-read keys and values stay finite whatever kernel SDPA picks);
    and per sliding window among `layers`, the same within that many columns."""
    rows, columns = real.shape
    before = columns - size
    query_at = torch.arange(before, columns, device=real.device).unsqueeze(1)  # [S, 1]
    key_at = torch.arange(columns, device=real.device).unsqueeze(0)  # [1, C + S]
    causal = key_at <= query_at
    own = key_at == query_at
    allowed = ((causal & real.unsqueeze(1)) | own).unsqueeze(1)
    windowed = {
        window: allowed & (query_at - key_at < window)
        for window in {layer.window for layer in layers if layer.window is not None}
    }
    return allowed, windowed


def _llama_parts(base: nn.Module, rows: int, kernels: Kernels) -> _Parts | None:
    """The parts of a `STEPPED_CLASSES` network, or None where one is not a kind we step
    through: another rotary type, another activation, sliding windows, a custom embedding."""
    config = base.config
    rope = getattr(config, "rope_parameters", None) or {}
    if rope.get("rope_type", "default") != "default" or config.hidden_act != "silu":
        return None
    if getattr(config, "use_sliding_window", False) or any(
        kind != "full_attention" for kind in getattr(config, "layer_types", None) or []
    ):
        return None
    inner = base.model
    if type(inner.embed_tokens) is not nn.Embedding or type(inner.norm).__name__ not in (
        LEAN_NORMS
    ):
        return None
    layers = []
    for layer in inner.layers:
        built = _layer(layer, rows, kernels)
        if built is None:
            return None
        layers.append(built)
    lm_head = _fused([base.lm_head], rows, kernels)
    if lm_head is None:
        return None
    rotary = inner.rotary_emb
    table = (rotary.inv_freq.detach().float(), float(getattr(rotary, "attention_scaling", 1.0)))
    return _Parts(layers, lm_head, inner.norm.weight.detach(), [table], F.silu)


def _layer(layer: nn.Module, rows: int, kernels: Kernels) -> _Layer | None:
    """A Llama decoder layer's fused products and norm weights, or None when a part is not
    one we step through."""
    if not all(
        type(norm).__name__ in LEAN_NORMS
        for norm in (layer.input_layernorm, layer.post_attention_layernorm)
    ):
        return None
    if gate_activation(layer.mlp) != "silu":
        return None
    # Llama's norms multiply their weight in the stream's type
    norms = (layer.input_layernorm.weight, layer.post_attention_layernorm.weight)
    return _products(layer, rows, kernels, *(norm.detach().to(kernels.dtype) for norm in norms))


def _products(
    layer: nn.Module, rows: int, kernels: Kernels, norm_in: Tensor, norm_mlp: Tensor
) -> _Layer | None:
    """A decoder layer's four fused products and the effective weights of its RMSNorms before
    attention (`norm_in`) and before the MLP (`norm_mlp`), in the type the family applies
    them in; or None when a linear layer is not one `merged_weight` reads. In float32 each
    norm's weight, with the sqrt(width) that `LlamaSteps._normalized` leaves out, is folded
    into the input columns of the products that read it; in a half type the layer keeps the
    weights, applied as the modules apply them (folding would round the products' weights
    once more)."""
    fold = kernels.dtype == torch.float32
    root = norm_in.numel() ** 0.5
    scale_in, scale_mlp = (norm.float() * root if fold else None for norm in (norm_in, norm_mlp))
    attention, mlp = layer.self_attn, layer.mlp
    qkv = _fused([attention.q_proj, attention.k_proj, attention.v_proj], rows, kernels, scale_in)
    gate_up = _fused([mlp.gate_proj, mlp.up_proj], rows, kernels, scale_mlp)
    out = _fused([attention.o_proj], rows, kernels)
    down = _fused([mlp.down_proj], rows, kernels)
    if qkv is None or gate_up is None or out is None or down is None:
        return None
    products = _Layer(qkv=qkv, out=out, gate_up=gate_up, down=down)
    return products if fold else replace(products, norm_in=norm_in, norm_mlp=norm_mlp)


def _gemma_parts(base: nn.Module, rows: int, kernels: Kernels) -> _Parts | None:
    """The parts of a `GEMMA_CLASSES` network: every norm's effective weight is 1 + w, the
    query and key heads are normalised before rotation, the attention's and the MLP's
    outputs are normalised before their residual sums, sliding-window layers beside global
    ones each have their rotary base, the embeddings are scaled, and the MLP's gate is a
    tanh GELU. None where the network has a part we do not step through (soft caps,
    bidirectional attention, another rotary type or activation)."""
    config = base.config
    if config.attn_logit_softcapping is not None or config.final_logit_softcapping is not None:
        return None
    if getattr(config, "use_bidirectional_attention", False):
        return None
    if config.hidden_activation not in TANH_GELUS:
        return None
    inner = base.model
    rotary = inner.rotary_emb
    kinds = sorted(set(config.layer_types))
    if type(rotary).__name__ not in GEMMA_ROTARIES or any(
        rotary.rope_type.get(kind) != "default" for kind in kinds
    ):
        return None
    tables = [
        (
            getattr(rotary, f"{kind}_inv_freq").detach().float(),
            float(getattr(rotary, f"{kind}_attention_scaling")),
        )
        for kind in kinds
    ]
    if type(inner.norm).__name__ not in GEMMA_NORMS:
        return None
    layers = []
    for index, layer in enumerate(inner.layers):
        kind = config.layer_types[index]
        window = config.sliding_window if kind == "sliding_attention" else None
        built = _gemma_layer(layer, rows, kernels, kinds.index(kind), window)
        if built is None:
            return None
        layers.append(built)
    lm_head = _fused([base.lm_head], rows, kernels)
    if lm_head is None:
        return None
    embedding = inner.embed_tokens
    scale = embedding.embed_scale.detach().to(embedding.weight.dtype)
    return _Parts(layers, lm_head, _gemma_weight(inner.norm), tables, tanh_gelu, scale, True)


def _gemma_layer(
    layer: nn.Module, rows: int, kernels: Kernels, rotary: int, window: int | None
) -> _Layer | None:
    """A Gemma 3 decoder layer's fused products and norm weights, or None when a part is
    not one we step through."""
    attention = layer.self_attn
    norms = (
        layer.input_layernorm,
        layer.pre_feedforward_layernorm,
        layer.post_attention_layernorm,
        layer.post_feedforward_layernorm,
        attention.q_norm,
        attention.k_norm,
    )
    if not all(type(norm).__name__ in GEMMA_NORMS for norm in norms):
        return None
    # Gemma's norms multiply their 1 + w in float32
    products = _products(layer, rows, kernels, *(_gemma_weight(norm) for norm in norms[:2]))
    if products is None:
        return None
    heads = attention.q_proj.out_features // attention.head_dim
    kv_heads = attention.k_proj.out_features // attention.head_dim
    qk_norm = torch.cat(
        [
            _gemma_weight(attention.q_norm).expand(heads, -1),
            _gemma_weight(attention.k_norm).expand(kv_heads, -1),
        ]
    )
    return replace(
        products,
        qk_norm=qk_norm,
        post_attention=_gemma_weight(layer.post_attention_layernorm),
        post_mlp=_gemma_weight(layer.post_feedforward_layernorm),
        rotary=rotary,
        window=window,
    )


def _gemma_weight(norm: nn.Module) -> Tensor:
    """A Gemma RMSNorm's effective weight, 1 + w, in float32 as the module computes it."""
    return 1.0 + norm.weight.detach().float()


def tanh_gelu(x: Tensor) -> Tensor:
    """GELU with the tanh approximation: Gemma's `gelu_pytorch_tanh`."""
    return F.gelu(x, approximate="tanh")


def _fused(
    modules: list[nn.Module], rows: int, kernels: Kernels, input_scale: Tensor | None = None
) -> Product | None:
    """One product for several linear layers of the same input, their outputs side by side,
    or None when one of them is not a layer `merged_weight` reads. With `input_scale`
    [in_features] the product is that of the layers' input multiplied by it (the scaled weight
    computed in float32 and rounded once to the weights' type)."""
    weights, biases = [], []
    for module in modules:
        weight, bias = merged_weight(module)
        if weight is None:
            return None
        weights.append(weight)
        biases.append(bias)
    weight = weights[0] if len(weights) == 1 else torch.cat(weights, dim=0)
    if input_scale is not None:
        weight = (weight.float() * input_scale.float()).to(weight.dtype)
    weight = weight.to(kernels.dtype)  # float32 master weights computing in bfloat16: cast once
    if all(bias is None for bias in biases):
        bias = None
    else:
        bias = torch.cat(
            [
                b.detach() if b is not None else w.new_zeros(w.size(0))
                for w, b in zip(weights, biases, strict=True)
            ]
        ).to(kernels.dtype)
    return Product(weight, bias, rows, kernels)


def rotate(x: Tensor, cos: Tensor, signed_sin: Tensor) -> Tensor:
    """Rotary embedding of x [rows, heads, dim] (the two halves rotated as one complex
    number each): x * cos + (-second, first) * sin, the swapped halves as a roll and the
    sign in `signed_sin`."""
    return torch.addcmul(x * cos, x.roll(x.size(-1) // 2, dims=-1), signed_sin)
