"""The reference policy of the KL term: the trained network as it was when GRPO started."""

from __future__ import annotations

import torch
from torch import Tensor

from src.model.network import PolicyNetwork, Scorer, Sequences


def reference_policy(
    network: PolicyNetwork, uses_kl: bool, loaded: Scorer | None = None
) -> Scorer | None:
    """None without a KL term (no reference is kept); otherwise `loaded` (a saved model, from
    `algo.ref_model_path`) or the network's frozen starting point, taken now: under LoRA the
    disabled adapter, else a frozen copy."""
    if not uses_kl:
        return None
    return loaded if loaded is not None else network.frozen_reference()


@torch.no_grad()
def reference_log_probs(
    reference: Scorer | None, sequences: Sequences, temperature: float
) -> Tensor | None:
    """Per-token log-probs [N, T] of the completions under the reference, None without one."""
    if reference is None:
        return None
    return reference.log_probs(sequences, temperature)[0]
