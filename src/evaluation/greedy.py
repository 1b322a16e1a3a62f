"""The one held-out scorer: greedy answers of the trained network, scored by the task's reward.

GRPO validation (`eval/*`), the SFT warm start's stopping check (`sft/eval_reward`) and
`python -m src.eval` all score through `GreedyScorer`, so the three numbers mean the same.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor
from torchmetrics.aggregation import MeanMetric

from src.model.network import PolicyNetwork
from src.policy.episode import Episode, detail_values, run_episode
from src.policy.role import Role
from src.reward.combine import CombinedReward
from src.rollout.sampler import Sampler
from src.utils.distributed import collective_device, gather_objects


class GreedyScorer:
    """Scores batches of rows with one greedy answer each and keeps the scores until `means`."""

    def __init__(self, sampler: Sampler, role: Role, reward: CombinedReward) -> None:
        self.sampler = sampler
        self.role = role
        self.reward = reward
        self.scores: dict[str, list[Tensor]] = {}  # "reward" and each function -> per-batch scores
        self.details: list[dict[str, Any]] = []  # what the role did per row, e.g. queries

    @torch.no_grad()
    def score(self, network: PolicyNetwork, rows: list[dict[str, Any]]) -> Episode:
        """The network's greedy answer to each row, scored; also kept for `means`."""
        episode = run_episode(network, self.sampler, self.role, self.reward, rows, 1, greedy=True)
        for name, scores in {"reward": episode.rewards, **episode.reward_parts}.items():
            self.scores.setdefault(name, []).append(scores.detach().cpu())
        self.details += episode.details
        return episode

    def means(self) -> dict[str, float]:
        """Mean total reward, mean of each function and of each numeric role detail
        (`role/<key>`) over the rows scored since the last call, by every process together
        (each scores its share of the rows; every process must call this)."""
        values = {name: torch.cat(parts) for name, parts in self.scores.items()}
        values.update(detail_values(self.details))
        self.scores, self.details = {}, []
        names = sorted({name for names in gather_objects(sorted(values)) for name in names})
        means = {}
        for name in names:  # the same names, in the same order, on every process
            mean = MeanMetric(nan_strategy="error").set_dtype(torch.float64).to(collective_device())
            if name in values and values[name].numel():
                mean.update(values[name].double().to(mean.device))
            means[name] = float(mean.compute())
        return means
