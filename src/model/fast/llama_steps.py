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

It reads transformers' layer and rotary internals, so it serves only float32 CPU networks of
the classes in `STEPPED_CLASSES` with the plain rotary embedding, in eval mode (`LlamaSteps.of`
returns None for anything else; `StaticSteps` serves other float types and devices), and
only once `fused_steps_proven` has found its logits over a few decoding steps equal to the
network's own forward (`src.model.fast.decoding`).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from src.model.fast.lean_layers import LEAN_NORMS, SILU_CLASSES
from src.model.fast.packed import can_pack, merged_weight, packed_product, smallest_packed
from src.model.positions import position_ids

# causal LM classes whose decoder layers are pre-norm RMSNorm, rotary attention and a SiLU
# gated MLP, with biases (if any) only on the linear layers
STEPPED_CLASSES = frozenset({"LlamaForCausalLM", "Qwen2ForCausalLM"})


class Product:
    """x -> x @ weight.T + bias: called, for batches of exactly the steps' `rows` rows
    (through a copy packed for MKL when that is worth it, `src.model.fast.packed`); `any`, for
    any number of rows (the prompts)."""

    def __init__(self, weight: Tensor, bias: Tensor | None, rows: int, pack: bool) -> None:
        self.weight = weight
        self.bias = None if bias is None else bias.detach()
        worth = pack and can_pack(rows) and weight.numel() >= smallest_packed()
        self._packed = packed_product(weight, self.bias, rows) if worth else None

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
        return F.linear(x, self.weight, self.bias)


@dataclass
class _Layer:
    qkv: Product  # normalised hidden -> queries, keys, values (input RMSNorm weight folded in)
    out: Product  # attention output -> hidden
    gate_up: Product  # normalised hidden -> gate, up (post-attention RMSNorm weight folded in)
    down: Product  # MLP width -> hidden


class LlamaSteps:
    """One decoding step of `rows` rows at a time for a supported network (`of`): `prefill`
    the prompts, then `step` once per new token."""

    def __init__(self, network: nn.Module, layers: list[_Layer], lm_head: Product, rows: int):
        config = network.config
        self.rows = rows
        self.heads = config.num_attention_heads
        self.kv_heads = config.num_key_value_heads or self.heads
        self.head_dim = getattr(config, "head_dim", None) or config.hidden_size // self.heads
        self.eps = config.rms_norm_eps
        self.layers = layers
        inner = network.model
        self.embed = inner.embed_tokens.weight.detach()
        self.norm_final = inner.norm.weight.detach()
        self.lm_head = lm_head
        rotary = inner.rotary_emb
        self.inv_freq = rotary.inv_freq.detach().float()
        self.rotary_scale = float(getattr(rotary, "attention_scaling", 1.0))
        self.scaling = inner.layers[0].self_attn.scaling
        # per layer, keys and values [rows * kv_heads, width, head_dim]: one matrix per row
        # and key/value head
        self.keys: list[Tensor] = []
        self.values: list[Tensor] = []
        self.bias = torch.empty(0)  # [rows * kv_heads, 1, width]: 0, or -inf on padding
        self.filled = 0

    @classmethod
    def of(cls, network: nn.Module, rows: int, pack: bool = True) -> LlamaSteps | None:
        """Steps for `network` (a causal LM, or a peft model over one) at `rows` rows, its
        large products packed for MKL when `pack` (and worth it), or None when it is not an
        eval-mode network of `STEPPED_CLASSES`, of a type and on a device that `serves` takes,
        with plain rotary embeddings, plain RMSNorms, SiLU MLPs, and linear layers that are
        `nn.Linear` or vanilla LoRA over one."""
        base = network.get_base_model() if hasattr(network, "get_base_model") else network
        if network.training or type(base).__name__ not in STEPPED_CLASSES:
            return None
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
        if not cls.serves(inner.embed_tokens.weight):
            return None
        layers = []
        for layer in inner.layers:
            built = _layer(layer, rows, pack)
            if built is None:
                return None
            layers.append(built)
        lm_head = _fused([base.lm_head], rows, pack)
        if lm_head is None:
            return None
        return cls(base, layers, lm_head, rows)

    @staticmethod
    def serves(weight: Tensor) -> bool:
        """Whether networks with weights like `weight` are stepped: float32 on the CPU, where
        per-operation overhead is what a step costs."""
        return weight.dtype == torch.float32 and weight.device.type == "cpu"

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
        with room for `new_tokens` more positions. Returns the float32 logits [B, V] of each
        prompt's last position (they predict its first new token)."""
        return self.lm_head.any(
            self._prompt_hidden(prompt_ids, prompt_mask, group_size, new_tokens)
        ).float()

    @torch.inference_mode()
    def _prompt_hidden(
        self, prompt_ids: Tensor, prompt_mask: Tensor, group_size: int, new_tokens: int
    ) -> Tensor:
        """The final norm's output [B, hidden] at each prompt's last position, writing every
        layer's keys and values into the cache of the prompt's G rows."""
        prompts, filled = prompt_ids.shape
        heads, kv_heads, dim = self.heads, self.kv_heads, self.head_dim
        width = filled + new_tokens
        matrices = self.rows * kv_heads
        cos, sin = self._rotary(position_ids(prompt_mask).unsqueeze(-1))  # [B, P, 1, dim]
        real = prompt_mask.bool()
        causal = torch.ones(filled, filled, dtype=torch.bool, device=real.device).tril_()
        # [B, 1, P, P], True attends; a padding position attends to itself only, so that its
        # (never read) keys and values are finite whatever kernel SDPA picks
        own = torch.eye(filled, dtype=torch.bool, device=real.device)
        allowed = ((causal & real.unsqueeze(1)) | own).unsqueeze(1)
        hidden = F.embedding(prompt_ids, self.embed)
        rotated_width = (heads + kv_heads) * dim
        self.keys, self.values = [], []
        for layer in self.layers:
            qkv = layer.qkv.any(self._normalized(hidden))
            rotated = rotate(
                qkv[..., :rotated_width].view(prompts, filled, heads + kv_heads, dim), cos, sin
            )
            query = rotated[:, :, :heads].transpose(1, 2)  # [B, heads, P, head_dim]
            key = rotated[:, :, heads:].transpose(1, 2)  # [B, kv_heads, P, head_dim]
            value = qkv[..., rotated_width:].view(prompts, filled, kv_heads, dim).transpose(1, 2)
            for source, target in ((key, self.keys), (value, self.values)):
                room = source.new_empty(matrices, width, dim)  # each of the G rows a copy
                room.view(prompts, group_size, kv_heads, width, dim)[..., :filled, :] = (
                    source.unsqueeze(1)
                )
                target.append(room)
            attended = F.scaled_dot_product_attention(
                query,
                key,
                value,
                attn_mask=allowed,
                scale=self.scaling,
                enable_gqa=heads != kv_heads,
            )  # a padding position's output is never read: its keys are masked for the others
            hidden = hidden + layer.out.any(
                attended.transpose(1, 2).reshape(prompts, filled, heads * dim)
            )
            gate, up = layer.gate_up.any(self._normalized(hidden)).chunk(2, dim=-1)
            hidden = hidden + layer.down.any(F.silu(gate) * up)
        bias = torch.zeros(prompts, width, device=real.device)
        bias[:, :filled].masked_fill_(~real, float("-inf"))
        self.bias = bias.repeat_interleave(group_size * kv_heads, dim=0).unsqueeze(1)
        self.filled = filled
        last = hidden[:, -1]
        return F.rms_norm(last, last.shape[-1:], self.norm_final, self.eps)

    def step(self, tokens: Tensor, positions: Tensor) -> Tensor:
        """Float32 logits [rows, V] after `tokens` [rows] at `positions` [rows, 1]."""
        # the last product runs outside inference mode, so the logits are a normal tensor
        # the caller may change in place
        return self.lm_head(self._last_hidden(tokens, positions)).float()

    @torch.inference_mode()
    def _last_hidden(self, tokens: Tensor, positions: Tensor) -> Tensor:
        """The final norm's output [rows, hidden] after `tokens` at `positions`, through every
        layer, writing each layer's new key and value into the cache."""
        rows, heads, kv_heads, dim = self.rows, self.heads, self.kv_heads, self.head_dim
        matrices, per_kv = rows * kv_heads, heads // kv_heads
        at = self.filled
        self.filled += 1
        bias = self.bias[..., : at + 1]
        cos, sin = self._rotary(positions)
        hidden = F.embedding(tokens, self.embed)
        rotated_width = (heads + kv_heads) * dim
        for index, layer in enumerate(self.layers):
            qkv = layer.qkv(self._normalized(hidden))
            # queries and keys are rotated together, then split
            rotated = rotate(qkv[:, :rotated_width].view(rows, heads + kv_heads, dim), cos, sin)
            keys, values = self.keys[index], self.values[index]
            keys.view(rows, kv_heads, -1, dim)[:, :, at] = rotated[:, heads:]
            values.view(rows, kv_heads, -1, dim)[:, :, at] = qkv[:, rotated_width:].view(
                rows, kv_heads, dim
            )
            # the query heads of one key/value head read it as that many query positions; for
            # one query per row, batched products and a softmax are quicker than SDPA's kernel
            scores = torch.baddbmm(
                bias,
                rotated[:, :heads].reshape(matrices, per_kv, dim),
                keys[:, : at + 1].transpose(1, 2),
                alpha=self.scaling,
            )
            attended = torch.bmm(scores.softmax(dim=-1), values[:, : at + 1])
            hidden = hidden + layer.out(attended.view(rows, heads * dim))
            gate, up = layer.gate_up(self._normalized(hidden)).chunk(2, dim=1)
            hidden = hidden + layer.down(F.silu(gate) * up)
        return F.rms_norm(hidden, hidden.shape[-1:], self.norm_final, self.eps)

    def _normalized(self, hidden: Tensor) -> Tensor:
        """RMSNorm of `hidden` [rows, width] without its weight and with a factor sqrt(width)
        left out: x / sqrt(sum(x^2) + width * eps). The products that read it carry the
        norm's weight times sqrt(width) (`_layer`)."""
        squares = torch.linalg.vecdot(hidden, hidden).unsqueeze_(-1)
        return hidden * squares.add_(hidden.size(-1) * self.eps).rsqrt_()

    def _rotary(self, positions: Tensor) -> tuple[Tensor, Tensor]:
        """cos and sin [..., 1, head_dim] at `positions` [..., 1] ([rows, 1] for a step,
        [B, P, 1] for the prompts), as the network's rotary module computes them, with the
        first half of sin negated (what `rotate` multiplies)."""
        freqs = positions.float() * self.inv_freq
        angles = torch.cat([freqs, freqs], dim=-1).unsqueeze(-2)
        cos, sin = angles.cos(), angles.sin()
        if self.rotary_scale != 1.0:
            cos, sin = cos * self.rotary_scale, sin * self.rotary_scale
        sin[..., : freqs.size(-1)].neg_()
        return cos, sin


def _layer(layer: nn.Module, rows: int, pack: bool) -> _Layer | None:
    """A decoder layer's fused products and norm weights, or None when a part is not one we
    step through."""
    attention, mlp = layer.self_attn, layer.mlp
    if not all(
        type(norm).__name__ in LEAN_NORMS
        for norm in (layer.input_layernorm, layer.post_attention_layernorm)
    ):
        return None
    if type(getattr(mlp, "act_fn", None)).__name__ not in SILU_CLASSES:
        return None
    # each RMSNorm's weight, with the sqrt(width) that `LlamaSteps._normalized` leaves out,
    # scales the input columns of the products that read it
    root = layer.input_layernorm.weight.numel() ** 0.5
    norm_in = layer.input_layernorm.weight.detach().float() * root
    norm_post = layer.post_attention_layernorm.weight.detach().float() * root
    qkv = _fused([attention.q_proj, attention.k_proj, attention.v_proj], rows, pack, norm_in)
    gate_up = _fused([mlp.gate_proj, mlp.up_proj], rows, pack, norm_post)
    out = _fused([attention.o_proj], rows, pack)
    down = _fused([mlp.down_proj], rows, pack)
    if qkv is None or gate_up is None or out is None or down is None:
        return None
    return _Layer(qkv=qkv, out=out, gate_up=gate_up, down=down)


def _fused(
    modules: list[nn.Module], rows: int, pack: bool, input_scale: Tensor | None = None
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
    if all(bias is None for bias in biases):
        bias = None
    else:
        bias = torch.cat(
            [
                b.detach() if b is not None else w.new_zeros(w.size(0))
                for w, b in zip(weights, biases, strict=True)
            ]
        )
    return Product(weight, bias, rows, pack)


def rotate(x: Tensor, cos: Tensor, signed_sin: Tensor) -> Tensor:
    """Rotary embedding of x [rows, heads, dim] (the two halves rotated as one complex
    number each): x * cos + (-second, first) * sin, the swapped halves as a roll and the
    sign in `signed_sin`."""
    return torch.addcmul(x * cos, x.roll(x.size(-1) // 2, dims=-1), signed_sin)
