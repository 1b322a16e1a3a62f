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

from src.model.causal_lm import CausalLM
from src.policy.episode import Sampler, run_episode
from src.reward.combine import CombinedReward


class SFTModule(L.LightningModule):
    """Cross-entropy on completion tokens only (prompt tokens never count), EOS included.

    Validation scores greedy completions with the task's reward; when `stop_at_reward` is set,
    training stops as soon as the held-out mean reward reaches it.
    """

    progress_label = "SFT"

    def __init__(
        self,
        lm: CausalLM,
        policy: Any,
        reward: CombinedReward,
        sampler: Sampler,
        optimizer: Callable[..., torch.optim.Optimizer],
        stop_at_reward: float | None = None,
    ) -> None:
        super().__init__()
        self.lm = lm
        self.policy = policy
        self.reward = reward
        self.sampler = sampler
        self.optimizer_factory = optimizer
        self.stop_at_reward = stop_at_reward
        self.eval_rewards: list[Tensor] = []
        self.last_eval_reward: float | None = None

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return self.optimizer_factory([p for p in self.lm.parameters() if p.requires_grad])

    def encode(self, rows: list[dict[str, Any]]) -> tuple[Tensor, Tensor, Tensor]:
        """[left-padded prompt | right-padded target + EOS]: ids, attention mask, target mask."""
        tokenizer = self.lm.tokenizer
        prompts = self.lm.encode_prompts(self.policy.prompts(rows, tokenizer))
        targets = [
            tokenizer(text, add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id]
            for text in self.policy.sft_targets(rows)
        ]
        width = max(len(t) for t in targets)
        target_ids = torch.full((len(rows), width), tokenizer.pad_token_id, dtype=torch.long)
        target_mask = torch.zeros((len(rows), width), dtype=torch.long)
        for i, ids in enumerate(targets):
            target_ids[i, : len(ids)] = torch.tensor(ids)
            target_mask[i, : len(ids)] = 1
        target_ids, target_mask = target_ids.to(self.device), target_mask.to(self.device)
        input_ids = torch.cat([prompts["input_ids"], target_ids], dim=1)
        attention = torch.cat([prompts["attention_mask"], target_mask], dim=1)
        return input_ids, attention, target_mask

    def training_step(self, batch: list[dict[str, Any]], batch_idx: int) -> Tensor:
        input_ids, attention, target_mask = self.encode(batch)
        logps, _ = self.lm.token_log_probs(input_ids, attention, target_mask.size(1))
        mask = target_mask.to(logps.dtype)
        loss = -(logps * mask).sum() / mask.sum()
        self.log("sft/loss", loss, prog_bar=True)
        return loss

    def validation_step(self, batch: list[dict[str, Any]], batch_idx: int) -> None:
        episode = run_episode(
            self.lm, self.sampler, self.policy, self.reward, batch, 1, greedy=True
        )
        self.eval_rewards.append(episode.rewards.cpu())

    def on_validation_epoch_end(self) -> None:
        value = float(torch.cat(self.eval_rewards).mean())
        self.eval_rewards = []
        if self.trainer.sanity_checking:
            return
        self.last_eval_reward = value
        self.log("sft/eval_reward", value, prog_bar=True)
        if self.stop_at_reward is not None and value >= self.stop_at_reward:
            self.trainer.should_stop = True
