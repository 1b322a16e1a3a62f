"""Fast path `chunked_head`: the log-prob forwards stop at the final hidden states and the
vocabulary projection runs a chunk of positions at a time (`src.model.head_log_probs`), so no
logits over the whole vocabulary exist for every position at once.

It relies on the network being its decoder (`get_decoder`) followed by a plain linear head
(`get_output_embeddings`), nothing after it: a model that scales or caps its logits after the
head (Gemma 2's soft cap, Granite's logit scale) would be scored wrongly. So before its first
use on a kind of network, the probe compares the log-probs of a probe batch through the
decoder and the chunked head with the log-softmax of the network's own logits; on a
difference the full logits run. Used where memory is what the logits cost: on a GPU.
"""

from __future__ import annotations

from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from src.model.fast import onednn
from src.model.fast.probe import largest_difference, probe_input
from src.model.head_log_probs import Head, head_log_probs
from src.model.hf_cache import CACHE, returned_cache
from src.model.positions import position_ids


def plain_head(network: nn.Module) -> nn.Linear | None:
    """The network's output projection when it is a plain `nn.Linear` under a decoder, or
    None."""
    head = network.get_output_embeddings() if hasattr(network, "get_output_embeddings") else None
    has_decoder = callable(getattr(network, "get_decoder", None))
    return head if type(head) is nn.Linear and has_decoder else None


def hidden_forward(network: nn.Module) -> Callable[..., Any]:
    """forward(**kwargs) of the network's decoder alone, its output's `logits` the final
    hidden states [N, P, H] (where a causal LM's forward has its logits; `logits_to_keep` is
    dropped: the caller takes the positions it needs) and its cache where asked for."""
    decoder = network.get_decoder()

    def forward(**kwargs: Any) -> Any:
        kwargs.pop("logits_to_keep", None)
        out = decoder(**kwargs)
        cache = returned_cache(out) if kwargs.get("use_cache") else None
        return SimpleNamespace(logits=out.last_hidden_state, **{CACHE: cache})

    return forward


def chunked_log_probs(
    network: nn.Module,
    hidden: Tensor,
    targets: Tensor,
    temperature: float = 1.0,
    with_entropy: bool = False,
    mask: Tensor | None = None,
) -> tuple[Tensor, Tensor | None]:
    """Log-probs [N, T] of `targets` from final hidden states [N, T, H] through the
    network's head, in chunks (`head_log_probs`), its products through oneDNN where the head
    is routed there now (inside `onednn_linears`, proven for this network). `mask` [N, T]
    (1 on the positions scored) leaves the others out of the head's work: 0 there."""
    head = plain_head(network)
    if head is None:
        raise ValueError("chunked_log_probs needs a network whose head is a plain nn.Linear")
    product = onednn.product if onednn.is_routed(head) else F.linear
    chunked = Head(head.weight, head.bias, temperature, product)
    return head_log_probs(hidden, chunked, targets, with_entropy, mask=mask)


@torch.no_grad()
def check_chunked_head(network: nn.Module) -> float:
    """The largest difference between the log-probs of the probe batch's continuations from
    the decoder and the chunked head, and from the network's own logits."""
    prompt_ids, prompt_mask, continuations = probe_input(network, prompts=2, group_size=1)
    ids = torch.cat([prompt_ids, continuations], dim=1)
    mask = torch.cat([prompt_mask, torch.ones_like(continuations)], dim=1)
    inputs = {"input_ids": ids, "attention_mask": mask, "position_ids": position_ids(mask)}
    count = continuations.size(1)
    logits = network(**inputs, use_cache=False).logits[:, -count - 1 : -1].float()
    plain = torch.log_softmax(logits, dim=-1).gather(-1, continuations.unsqueeze(-1)).squeeze(-1)
    hidden = hidden_forward(network)(**inputs, use_cache=False).logits[:, -count - 1 : -1]
    fast, _ = chunked_log_probs(network, hidden, continuations)
    return largest_difference(fast, plain)
