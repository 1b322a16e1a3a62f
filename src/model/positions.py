"""Position ids of left-padded rows, shared by scoring, decoding and the fast paths' probes."""

from __future__ import annotations

from torch import Tensor


def position_ids(attention_mask: Tensor) -> Tensor:
    """Position ids that follow a left-padded attention mask (pads share position 0), as
    `generate` gives them, so scores match the distribution samples were drawn from."""
    return (attention_mask.cumsum(dim=1) - 1).clamp(min=0)
