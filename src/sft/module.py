"""Supervised warm start: teach the role's target completion with token cross-entropy.

GRPO learns only from groups whose rewards differ, so a model that is never right learns
nothing; a short SFT brings it to being right part of the time. Recipes reuse this module.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import lightning as L
import torch
from torch import Tensor

from src.evaluation.greedy import GreedyScorer
from src.model.network import PolicyNetwork
from src.policy.role import Role
from src.reward.combine import CombinedReward
from src.rollout.rollout import Rollout, teacher_forced
from src.rollout.sampler import Sampler


class SFTModule(L.LightningModule):
    """Cross-entropy on completion tokens only (prompt tokens never count), end marker included.

    Validation scores greedy completions with the task's reward; when `stop_at_reward` is set,
    training stops as soon as the held-out mean reward reaches it.
    """

    def __init__(
        self,
        lm: PolicyNetwork,
        policy: Role,
        reward: CombinedReward,
        sampler: Sampler,
        optimizer: Callable[..., torch.optim.Optimizer],
        stop_at_reward: float | None = None,
    ) -> None:
        super().__init__()
        self.lm = lm
        self.policy = policy
        self.optimizer_factory = optimizer
        self.stop_at_reward = stop_at_reward
        self.scorer = GreedyScorer(sampler, policy, reward)
        self.last_eval_reward: float | None = None

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return self.optimizer_factory(self.lm.trainable_parameters())

    def teacher_forced(self, rows: list[dict[str, Any]]) -> Rollout:
        """The rows' prompts with their target completions, as a rollout to score."""
        prompts = self.policy.prompts(rows, self.lm.tokenizer)
        return teacher_forced(self.lm, prompts, self.policy.sft_targets(rows))

    def training_step(self, batch: list[dict[str, Any]], batch_idx: int) -> Tensor:
        targets = self.teacher_forced(batch)
        logps, _ = self.lm.log_probs(targets)
        mask = targets.completion_mask.to(logps.dtype)
        loss = -(logps * mask).sum() / mask.sum()
        self.log("sft/loss", loss, prog_bar=True, sync_dist=True)  # mean over processes
        return loss

    def validation_step(self, batch: list[dict[str, Any]], batch_idx: int) -> None:
        self.scorer.score(self.lm, batch)

    def on_validation_epoch_end(self) -> None:
        value = self.scorer.means()["reward"]
        if self.trainer.sanity_checking:
            return
        self.last_eval_reward = value
        self.log("sft/eval_reward", value, prog_bar=True)
        if self.stop_at_reward is not None and value >= self.stop_at_reward:
            self.trainer.should_stop = True
