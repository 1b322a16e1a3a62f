"""The GRPO LightningModule: one rollout per batch, then `num_iterations` clipped updates.

Optimization is manual because one rollout feeds several optimizer steps (PPO-style) and the
reference and old-policy log-probs are computed once per rollout. Metrics go straight to the
loggers at the optimizer step they describe, under TRL's names. The module sees the network
only through `PolicyNetwork`, the sampler through `Sampler` and the role through `Role`.
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Callable
from typing import Any

import lightning as L
import torch
from torch import Tensor

from src.evaluation.greedy import GreedyScorer
from src.grpo.metrics import rollout_metrics, sample_rows
from src.grpo.nonfinite import NonFiniteGuard
from src.grpo.objective import group_advantages, grpo_loss, keep_top_k, to_whole_batch
from src.grpo.reference import reference_log_probs, reference_policy
from src.model.network import PolicyNetwork, Scorer
from src.policy.episode import run_episode
from src.policy.role import Role
from src.reward.combine import CombinedReward
from src.rollout.rollout import Rollout
from src.rollout.sampler import Sampler
from src.tracking.samples_table import log_samples_table
from src.utils.errors import ConfigError
from src.utils.rng import rng_states, set_rng_states
from src.utils.timing import phase, phase_timer

# Checkpoints taken after the step's updates are exactly what resuming needs.
warnings.filterwarnings("ignore", message="Using ModelCheckpoint with manual optimization")
# The frozen reference copy is in eval mode on purpose.
warnings.filterwarnings("ignore", message=r"Found \d+ module\(s\) in eval mode")


class GRPOModule(L.LightningModule):
    """Group Relative Policy Optimization of a network with a role, a sampler and rewards.

    The settings are checked once, before any model loads, by `src.runs.settings`.
    """

    def __init__(
        self,
        lm: PolicyNetwork,
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
        top_k_ratio: float = 1.0,
        ref_model_path: str | None = None,
        metric_aliases: dict[str, str] | None = None,
        reference: Scorer | None = None,
    ) -> None:
        super().__init__()
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
        self.max_completion_length = max_completion_length or sampler.max_completion_length
        self.temperature = float(sampler.temperature)
        self.samples_every_n_steps = samples_every_n_steps
        self.skip_zero_advantage = skip_zero_advantage
        self.nonfinite = NonFiniteGuard(max_nonfinite_steps)
        self.top_k_ratio = top_k_ratio
        self.metric_aliases = dict(metric_aliases or {})  # extra name -> our metric it repeats
        if ref_model_path is not None and reference is None:
            raise ValueError(
                "algo.ref_model_path is loaded by src.train; pass the loaded model as `reference`"
            )
        # taken before any update: the initial policy, or the model loaded from ref_model_path
        self.reference = reference_policy(lm, kl_beta, reference)
        self.scorer = GreedyScorer(sampler, policy, reward)  # held-out evaluation
        self.num_tokens = 0
        self.restored_rng: dict[str, Any] | None = None  # from a checkpoint, set at train start

    # ----------------------------------------------------------------------------- resuming
    def on_save_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        """Counters that continue across a resume, and the random generators, so the steps
        after a resume sample what an uninterrupted run would."""
        checkpoint["grpo"] = {
            "num_tokens": self.num_tokens,
            **self.nonfinite.state_dict(),
            "rng": rng_states(),
        }

    def on_load_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        state = checkpoint.get("grpo", {})
        self.num_tokens = int(state.get("num_tokens", 0))
        self.nonfinite.load_state_dict(state)
        self.restored_rng = state.get("rng")

    def on_train_start(self) -> None:
        # Restored here rather than on load: nothing else draws from them before the next step.
        if self.restored_rng is not None:
            set_rng_states(self.restored_rng)
            self.restored_rng = None

    # ----------------------------------------------------------------------------- training
    def configure_optimizers(self) -> Any:
        optimizer = self.optimizer_factory(self.lm.trainable_parameters())
        if self.scheduler_factory is None:
            return optimizer
        scheduler = self.scheduler_factory(optimizer=optimizer)
        return {
            "optimizer": optimizer,
            "lr_scheduler": {"scheduler": scheduler, "interval": "step"},
        }

    def training_step(self, batch: list[dict[str, Any]], batch_idx: int) -> None:
        with phase_timer() as timer:
            self.grpo_step(batch, timer.metrics)

    def grpo_step(
        self, batch: list[dict[str, Any]], timing: Callable[[], dict[str, float]]
    ) -> None:
        """One rollout and its updates; `timing` gives the seconds per phase so far
        (`timing/<phase>`), logged with each update's metrics."""
        started = time.perf_counter()
        episode = run_episode(
            self.lm, self.sampler, self.policy, self.reward, batch, self.group_size
        )
        rollout = episode.rollout
        advantages = group_advantages(episode.rewards, self.group_size, self.scale_rewards)
        advantages = keep_top_k(advantages, episode.rewards, self.group_size, self.top_k_ratio)
        advantages = advantages.to(self.device)
        old_logps = None
        with phase("log_probs"):
            if self.num_iterations > 1:
                with torch.no_grad():
                    old_logps = self.lm.log_probs(rollout, self.temperature)[0]
            ref_logps = reference_log_probs(self.reference, rollout, self.temperature)
        statistics = rollout_metrics(episode, self.group_size)
        self.num_tokens += int(rollout.prompt_mask.sum() + rollout.completion_mask.sum())

        optimizer = self.optimizers()
        scheduler = self.lr_schedulers()
        for _ in range(self.num_iterations):
            if self.global_step >= self.trainer.max_steps > 0:
                break  # max_steps falls inside this rollout's updates
            with phase("log_probs"):
                loss, loss_metrics = self.policy_loss(rollout, advantages, old_logps, ref_logps)
            with phase("update"):
                optimizer.zero_grad()
                grad_norm = torch.tensor(float("nan"))
                if torch.isfinite(loss):
                    self.manual_backward(loss)
                    grad_norm = self.clipped_gradient_norm(optimizer)
                finite = bool(torch.isfinite(loss) and torch.isfinite(grad_norm))
                if finite:
                    learning_rate = optimizer.param_groups[0]["lr"]
                    optimizer.step()
                    if scheduler is not None:
                        scheduler.step()
                else:
                    optimizer.zero_grad()  # the weights and optimizer state stay as they were
            if not finite:
                self.nonfinite.skip(self.global_step + 1, float(loss.detach()), float(grad_norm))
                continue
            self.nonfinite.passed()
            metrics = {
                **timing(),
                **statistics,
                **{name: float(value) for name, value in loss_metrics.items()},
                "loss": float(loss.detach()),
                "grad_norm": float(grad_norm),
                "skipped_steps": self.nonfinite.skipped,
                "learning_rate": learning_rate,
                "num_tokens": self.num_tokens,
                "mean_advantage": float(advantages.mean()),
                "step_time": time.perf_counter() - started,
            }
            metrics.update(aliased(metrics, self.metric_aliases))
            self.log_to_loggers(metrics)
        self.log_dict(
            {"reward": statistics["reward"], "kl": float(loss_metrics["kl"])},
            prog_bar=True,
            logger=False,
        )
        if (
            self.samples_every_n_steps
            and self.global_step % self.samples_every_n_steps < self.num_iterations
        ):
            rows = sample_rows(episode, advantages, self.group_size, self.global_step)
            log_samples_table(self.loggers, rows, self.global_step)

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
        the loss is brought back to the value (and gradient) of the whole batch. Entropy is
        then the mean over the completions trained on. A batch where every advantage is 0 is
        run whole, so its metrics stay complete.
        """
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
        metrics["mean_log_prob"] = (logps.detach() * part_mask).sum() / part_mask.sum().clamp(min=1)
        if part is not rollout:
            token_share = part_mask.sum() / rollout.completion_mask.sum()
            row_share = trained.float().mean()
            loss, metrics = to_whole_batch(loss, metrics, self.loss_type, row_share, token_share)
        return loss, metrics

    def log_to_loggers(self, metrics: dict[str, float]) -> None:
        """Write metrics at the current optimizer step to every logger."""
        for logger in self.loggers:
            logger.log_metrics(metrics, step=self.global_step)

    # ----------------------------------------------------------------------------- evaluation
    def validation_step(self, batch: list[dict[str, Any]], batch_idx: int) -> None:
        self.scorer.score(self.lm, batch)

    def on_validation_epoch_end(self) -> None:
        results = {f"eval/{name}": value for name, value in self.scorer.means().items()}
        if self.trainer.sanity_checking:
            return
        self.log_to_loggers(results)
        self.log_dict(results, prog_bar=False, logger=False)


def aliased(metrics: dict[str, float], aliases: dict[str, str]) -> dict[str, float]:
    """The metrics again under extra names (`algo.metric_aliases`: extra name -> ours)."""
    unknown = sorted(name for name in aliases.values() if name not in metrics)
    if unknown:
        raise ConfigError(
            f"algo.metric_aliases names metrics a step does not log: {unknown}; "
            f"it logs {sorted(metrics)}"
        )
    return {alias: metrics[name] for alias, name in aliases.items()}
