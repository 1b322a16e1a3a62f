"""The GRPO LightningModule: one rollout per batch, then `num_iterations` clipped updates.

Optimization is manual because one rollout feeds several optimizer steps (PPO-style) and the
reference and old-policy log-probs are computed once per rollout. Metrics go straight to the
loggers at the optimizer step they describe, under TRL's names.
"""

from __future__ import annotations

import copy
import time
import warnings
from collections.abc import Callable
from typing import Any

import lightning as L
import torch
from torch import Tensor

from src.grpo.objective import LOSS_TYPES, SCALES, group_advantages, grpo_loss
from src.model.causal_lm import CausalLM
from src.policy.episode import Episode, Role, Sampler, run_episode
from src.reward.combine import CombinedReward
from src.rollout.rollout import Rollout
from src.utils.rng import rng_states, set_rng_states

# Checkpoints taken after the step's updates are exactly what resuming needs.
warnings.filterwarnings("ignore", message="Using ModelCheckpoint with manual optimization")
# The frozen reference copy is in eval mode on purpose.
warnings.filterwarnings("ignore", message=r"Found \d+ module\(s\) in eval mode")


def check_algo_settings(
    *,
    group_size: int,
    kl_beta: float,
    epsilon_low: float,
    epsilon_high: float,
    loss_type: str,
    scale_rewards: str,
    num_iterations: int,
    max_nonfinite_steps: int,
    **others: Any,
) -> None:
    """Reject GRPO settings that cannot work, naming the `algo.*` key; called from the config
    before any model loads, and by the module itself."""
    if group_size < 2:
        raise ValueError(
            f"algo.group_size must be >= 2 (advantages are group-relative), got {group_size}"
        )
    if kl_beta < 0:
        raise ValueError(f"algo.kl_beta must be >= 0, got {kl_beta}")
    if not 0 <= epsilon_low < 1 or epsilon_high < 0:
        raise ValueError(
            "algo.epsilon_low must be in [0, 1) and algo.epsilon_high >= 0 (the ratio is clipped "
            f"to [1 - epsilon_low, 1 + epsilon_high]), got {epsilon_low} and {epsilon_high}"
        )
    if loss_type not in LOSS_TYPES:
        raise ValueError(f"algo.loss_type must be one of {LOSS_TYPES}, got {loss_type!r}")
    if scale_rewards not in SCALES:
        raise ValueError(f"algo.scale_rewards must be one of {SCALES}, got {scale_rewards!r}")
    if num_iterations < 1:
        raise ValueError(f"algo.num_iterations must be >= 1, got {num_iterations}")
    if max_nonfinite_steps < 1:
        raise ValueError(f"algo.max_nonfinite_steps must be >= 1, got {max_nonfinite_steps}")


class NonFiniteTrainingError(RuntimeError):
    """Too many updates in a row had a non-finite loss or gradient."""


class GRPOModule(L.LightningModule):
    """Group Relative Policy Optimization of a `CausalLM` with a role, a sampler and rewards."""

    progress_label = "GRPO"

    def __init__(
        self,
        lm: CausalLM,
        sampler: Sampler,
        policy: Role,
        reward: CombinedReward,
        optimizer: Callable[..., torch.optim.Optimizer],
        scheduler: Callable[..., Any] | None = None,
        group_size: int = 8,
        kl_beta: float = 0.0,
        epsilon_low: float = 0.2,
        epsilon_high: float = 0.2,
        loss_type: str = "grpo",
        scale_rewards: str = "group",
        num_iterations: int = 1,
        max_grad_norm: float | None = 1.0,
        max_completion_length: int | None = None,
        samples_every_n_steps: int = 50,
        skip_zero_advantage: bool = True,
        max_nonfinite_steps: int = 3,
    ) -> None:
        super().__init__()
        check_algo_settings(
            group_size=group_size,
            kl_beta=kl_beta,
            epsilon_low=epsilon_low,
            epsilon_high=epsilon_high,
            loss_type=loss_type,
            scale_rewards=scale_rewards,
            num_iterations=num_iterations,
            max_nonfinite_steps=max_nonfinite_steps,
        )
        self.automatic_optimization = False
        self.lm = lm
        self.sampler = sampler
        self.policy = policy
        self.reward = reward
        self.optimizer_factory = optimizer
        self.scheduler_factory = scheduler
        self.group_size = group_size
        self.kl_beta = kl_beta
        self.epsilon_low = epsilon_low
        self.epsilon_high = epsilon_high
        self.loss_type = loss_type
        self.scale_rewards = scale_rewards
        self.num_iterations = num_iterations
        self.max_grad_norm = max_grad_norm
        self.max_completion_length = max_completion_length or getattr(
            sampler, "max_completion_length", None
        )
        self.temperature = float(getattr(sampler, "temperature", 1.0))
        self.samples_every_n_steps = samples_every_n_steps
        self.skip_zero_advantage = skip_zero_advantage
        self.max_nonfinite_steps = max_nonfinite_steps
        self.skipped_steps = 0  # updates skipped for a non-finite loss or gradient, in all
        self.nonfinite_in_a_row = 0
        # The reference policy: the disabled adapter under LoRA, else a frozen copy of the start.
        self.reference: CausalLM | None = None
        if kl_beta != 0.0 and not lm.uses_lora:
            frozen = copy.deepcopy(lm.network).eval().requires_grad_(False)
            self.reference = CausalLM(frozen, lm.tokenizer)
        self.eval_scores: dict[str, list[Tensor]] = {}  # held-out scores of the current evaluation
        self.num_tokens = 0
        self.last_samples: list[dict[str, Any]] = []  # read by the samples-table callback
        self.restored_rng: dict[str, Any] | None = None  # from a checkpoint, set at train start

    # ----------------------------------------------------------------------------- resuming
    def on_save_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        """Counters that continue across a resume, and the random generators, so the steps
        after a resume sample what an uninterrupted run would."""
        checkpoint["grpo"] = {
            "num_tokens": self.num_tokens,
            "skipped_steps": self.skipped_steps,
            "nonfinite_in_a_row": self.nonfinite_in_a_row,
            "rng": rng_states(),
        }

    def on_load_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        state = checkpoint.get("grpo", {})
        self.num_tokens = int(state.get("num_tokens", 0))
        self.skipped_steps = int(state.get("skipped_steps", 0))
        self.nonfinite_in_a_row = int(state.get("nonfinite_in_a_row", 0))
        self.restored_rng = state.get("rng")

    def on_train_start(self) -> None:
        # Restored here rather than on load: nothing else draws from them before the next step.
        if self.restored_rng is not None:
            set_rng_states(self.restored_rng)
            self.restored_rng = None

    # ----------------------------------------------------------------------------- training
    def configure_optimizers(self) -> Any:
        params = [p for p in self.lm.parameters() if p.requires_grad]
        optimizer = self.optimizer_factory(params)
        if self.scheduler_factory is None:
            return optimizer
        scheduler = self.scheduler_factory(optimizer=optimizer)
        return {
            "optimizer": optimizer,
            "lr_scheduler": {"scheduler": scheduler, "interval": "step"},
        }

    @torch.no_grad()
    def reference_log_probs(self, episode: Episode) -> Tensor | None:
        """Per-token log-probs of the reference policy, or None when there is no KL term."""
        if self.kl_beta == 0.0:
            return None
        if self.reference is None:
            with self.lm.adapter_disabled():
                return self.lm.log_probs(episode.rollout, self.temperature)[0]
        return self.reference.log_probs(episode.rollout, self.temperature)[0]

    def training_step(self, batch: list[dict[str, Any]], batch_idx: int) -> None:
        started = time.perf_counter()
        episode = run_episode(
            self.lm, self.sampler, self.policy, self.reward, batch, self.group_size
        )
        rollout = episode.rollout
        advantages = group_advantages(episode.rewards, self.group_size, self.scale_rewards).to(
            self.device
        )
        old_logps = None
        if self.num_iterations > 1:
            with torch.no_grad():
                old_logps = self.lm.log_probs(rollout, self.temperature)[0]
        ref_logps = self.reference_log_probs(episode)
        rollout_metrics = self.rollout_metrics(episode)
        self.num_tokens += int(rollout.prompt_mask.sum() + rollout.completion_mask.sum())

        optimizer = self.optimizers()
        scheduler = self.lr_schedulers()
        for _ in range(self.num_iterations):
            if self.global_step >= self.trainer.max_steps > 0:
                break  # max_steps falls inside this rollout's updates
            loss, loss_metrics = self.policy_loss(rollout, advantages, old_logps, ref_logps)
            optimizer.zero_grad()
            grad_norm = torch.tensor(float("nan"))
            if torch.isfinite(loss):
                self.manual_backward(loss)
                grad_norm = self.clipped_gradient_norm(optimizer)
            if not (torch.isfinite(loss) and torch.isfinite(grad_norm)):
                optimizer.zero_grad()
                self.skip_nonfinite_update(loss, grad_norm)
                continue
            self.nonfinite_in_a_row = 0
            learning_rate = optimizer.param_groups[0]["lr"]
            optimizer.step()
            if scheduler is not None:
                scheduler.step()
            metrics = {
                **rollout_metrics,
                **{name: float(value) for name, value in loss_metrics.items()},
                "loss": float(loss.detach()),
                "grad_norm": float(grad_norm),
                "skipped_steps": self.skipped_steps,
                "learning_rate": learning_rate,
                "num_tokens": self.num_tokens,
                "step_time": time.perf_counter() - started,
            }
            self.log_to_loggers(metrics)
        self.log_dict(
            {"reward": rollout_metrics["reward"], "kl": float(loss_metrics["kl"])},
            prog_bar=True,
            logger=False,
        )
        if (
            self.samples_every_n_steps
            and self.global_step % self.samples_every_n_steps < self.num_iterations
        ):
            self.last_samples = self.sample_table(episode, advantages)

    def clipped_gradient_norm(self, optimizer: Any) -> Tensor:
        """The total gradient norm before clipping (TRL's `grad_norm`); gradients are clipped to
        `max_grad_norm` when it is set and the norm is finite."""
        params = [p for group in optimizer.param_groups for p in group["params"]]
        params = [p for p in params if p.grad is not None]
        if not params:
            return torch.tensor(0.0)
        norm = torch.nn.utils.get_total_norm([p.grad for p in params])
        if self.max_grad_norm and torch.isfinite(norm):
            torch.nn.utils.clip_grads_with_norm_(params, self.max_grad_norm, norm)
        return norm.detach().float().cpu()

    def skip_nonfinite_update(self, loss: Tensor, grad_norm: Tensor) -> None:
        """Leave the weights and optimizer state as they were; stop the run after
        `max_nonfinite_steps` such updates in a row (the last checkpoint is from before)."""
        self.skipped_steps += 1
        self.nonfinite_in_a_row += 1
        loss = loss.detach()
        warnings.warn(
            f"step {self.global_step + 1}: non-finite loss ({float(loss):g}) or gradient norm "
            f"({float(grad_norm):g}); update skipped ({self.nonfinite_in_a_row} in a row)",
            RuntimeWarning,
            stacklevel=2,
        )
        if self.nonfinite_in_a_row >= self.max_nonfinite_steps:
            raise NonFiniteTrainingError(
                f"{self.nonfinite_in_a_row} updates in a row had a non-finite loss or gradient "
                f"(last: loss {float(loss):g}, gradient norm {float(grad_norm):g}) at step "
                f"{self.global_step + 1}; stopping (algo.max_nonfinite_steps="
                f"{self.max_nonfinite_steps}). The weights are those of step {self.global_step}; "
                "the last checkpoint in the run folder's checkpoints/ is from before. Lower "
                "algo.optimizer.lr, or check the rewards and the data."
            )

    def policy_loss(
        self,
        rollout: Rollout,
        advantages: Tensor,
        old_logps: Tensor | None,
        ref_logps: Tensor | None,
    ) -> tuple[Tensor, dict[str, Tensor]]:
        """The GRPO loss of the rollout and its metrics, entropy included.

        Without a KL term a completion whose advantage is 0 adds nothing to the loss or its
        gradient, so with `skip_zero_advantage` only the others go through the network and
        the loss is rescaled to the value (and gradient) of the whole batch. Entropy is then
        the mean over the completions trained on. A batch where every advantage is 0 is run
        whole, so its metrics stay complete.
        """
        mask = rollout.completion_mask
        trained = advantages != 0
        if not (self.skip_zero_advantage and self.kl_beta == 0.0 and trained.any()):
            trained = torch.ones_like(trained)  # a KL term, or a batch with nothing to learn
        part = rollout.select(trained) if not trained.all() else rollout
        width = part.completion_ids.size(1)
        logps, entropy = self.lm.log_probs(part, self.temperature, with_entropy=True)
        loss, metrics = grpo_loss(
            logps,
            None if old_logps is None else old_logps[trained, :width],
            None if ref_logps is None else ref_logps[trained, :width],
            advantages[trained],
            part.completion_mask,
            beta=self.kl_beta,
            epsilon_low=self.epsilon_low,
            epsilon_high=self.epsilon_high,
            loss_type=self.loss_type,
            max_completion_length=self.max_completion_length,
        )
        part_mask = part.completion_mask.to(entropy.dtype)
        metrics["entropy"] = (entropy * part_mask).sum() / part_mask.sum().clamp(min=1)
        if part is not rollout:
            # Back to whole-batch normalisation; skipped tokens are never clipped.
            token_share = part_mask.sum() / mask.sum()
            row_share = trained.float().mean()
            loss = loss * (token_share if self.loss_type in ("bnpo", "dapo") else row_share)
            for name in ("clip_ratio/low_mean", "clip_ratio/high_mean", "clip_ratio/region_mean"):
                metrics[name] = metrics[name] * token_share
        return loss, metrics

    def rollout_metrics(self, episode: Episode) -> dict[str, float]:
        """Reward and completion statistics of one rollout, as TRL names them."""
        rewards = episode.rewards
        group_std = rewards.view(-1, self.group_size).std(dim=1)
        lengths = episode.rollout.lengths.float()
        clipped = episode.rollout.is_clipped.cpu()
        terminated = lengths[~clipped.to(lengths.device)]
        metrics = {
            "reward": float(rewards.mean()),
            "reward_std": float(group_std.mean()),
            "frac_reward_zero_std": float(
                torch.isclose(group_std, torch.zeros_like(group_std)).float().mean()
            ),
            "completions/mean_length": float(lengths.mean()),
            "completions/min_length": float(lengths.min()),
            "completions/max_length": float(lengths.max()),
            "completions/clipped_ratio": float(clipped.float().mean()),
            "completions/mean_terminated_length": float(terminated.mean())
            if terminated.numel()
            else 0.0,
        }
        for name, scores in episode.reward_parts.items():
            metrics[f"rewards/{name}/mean"] = float(scores.mean())
            metrics[f"rewards/{name}/std"] = float(scores.std())
            metrics[f"rewards/{name}/errors"] = float(episode.reward_errors[name])
        return metrics

    def sample_table(self, episode: Episode, advantages: Tensor) -> list[dict[str, Any]]:
        """One row per completion: prompt, completion, total reward, each part, advantage."""
        rows = []
        for i, completion in enumerate(episode.rollout.completions):
            prompt = episode.prompts[i // self.group_size]
            row = {"step": self.global_step, "prompt": prompt, "completion": completion}
            row["reward"] = float(episode.rewards[i])
            row.update({name: float(scores[i]) for name, scores in episode.reward_parts.items()})
            row["advantage"] = float(advantages[i])
            rows.append(row)
        return rows

    def log_to_loggers(self, metrics: dict[str, float]) -> None:
        """Write metrics at the current optimizer step to every logger."""
        for logger in self.loggers:
            logger.log_metrics(metrics, step=self.global_step)

    # ----------------------------------------------------------------------------- evaluation
    def validation_step(self, batch: list[dict[str, Any]], batch_idx: int) -> None:
        episode = run_episode(
            self.lm, self.sampler, self.policy, self.reward, batch, 1, greedy=True
        )
        for name, scores in {"reward": episode.rewards, **episode.reward_parts}.items():
            self.eval_scores.setdefault(name, []).append(scores.cpu())

    def on_validation_epoch_end(self) -> None:
        results = {
            f"eval/{name}": float(torch.cat(parts).mean())
            for name, parts in self.eval_scores.items()
        }
        self.eval_scores = {}
        if self.trainer.sanity_checking:
            return
        self.log_to_loggers(results)
        self.log_dict(results, prog_bar=False, logger=False)
