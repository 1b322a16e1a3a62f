"""The GRPO LightningModule: one rollout per batch, then `num_iterations` clipped updates.

Optimization is manual because one rollout feeds several optimizer steps (PPO-style) and the
reference and old-policy log-probs are computed once per rollout. Metrics go straight to the
loggers at the optimizer step they describe, under TRL's names. The module sees the network
only through `PolicyNetwork`, the sampler through `Sampler` and the role through `Role`.
"""

from __future__ import annotations

import logging
import math
import time
import warnings
from collections.abc import Callable
from typing import Any

import lightning as L
import torch
from lightning.pytorch.strategies import DDPStrategy, FSDPStrategy
from torch import Tensor

from src.data.learnability import RolloutFeedback
from src.evaluation.greedy import GreedyScorer
from src.grpo.advantages import estimate_advantages, keep_top_k, normalize_then_sum
from src.grpo.dynamic_sampling import sample_with_spread
from src.grpo.metrics import RolloutRecord, mean_figures, rollout_metrics, sample_rows
from src.grpo.nonfinite import NonFiniteGuard
from src.grpo.objective import (
    Denominators,
    TokenLogProbs,
    entropy_threshold,
    grpo_loss,
    sampler_correction,
    sampler_mismatch,
)
from src.grpo.passes import token_passes
from src.grpo.reduction import UpdatePlan, combine_passes, reduce_loss_metrics
from src.grpo.reference import reference_log_probs, reference_policy
from src.grpo.settings import AlgoSettings
from src.grpo.tied import TiedGroupsWatch
from src.model.network import PolicyNetwork, Scorer
from src.policy.episode import Episode, run_episode
from src.policy.role import Role
from src.reward.combine import CombinedReward
from src.rollout.rollout import Rollout
from src.rollout.sampler import Sampler
from src.tracking.samples_table import log_samples_table
from src.utils.distributed import (
    average_gradients,
    gather_objects,
    rank,
    sharded_norm,
    sum_over_processes,
    world_size,
)
from src.utils.errors import ConfigError
from src.utils.rng import rng_states, set_rng_states
from src.utils.timing import phase, phase_timer

log = logging.getLogger(__name__)

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
        settings: AlgoSettings | None = None,
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
        self.settings = settings = settings or AlgoSettings()
        self.max_completion_length = settings.max_completion_length or sampler.max_completion_length
        self.temperature = float(sampler.temperature)
        self.nonfinite = NonFiniteGuard(settings.max_nonfinite_steps)
        self.tied = TiedGroupsWatch(settings.warn_tied_rollouts)
        if settings.ref_model_path is not None and reference is None:
            raise ValueError(
                "algo.ref_model_path is loaded by src.train; pass the loaded model as `reference`"
            )
        self.loaded_reference = reference
        self.reference: Scorer | None = None  # built by configure_model, before any update
        self.scorer = GreedyScorer(sampler, policy, reward)  # held-out evaluation
        # metric prefix -> scorer, in the order of the datamodule's held-out loaders
        self.held_out: dict[str, GreedyScorer] = {"eval": self.scorer}
        self.num_tokens = 0
        self.evaluated_step: int | None = None  # the optimizer step of the last evaluation
        self.restored_rng: Any = None  # from a checkpoint, set at train start

    def configure_model(self) -> None:
        """Take the KL reference: the model loaded from `ref_model_path`, or the policy as it
        is before any update. Lightning calls this hook inside the strategy's context and
        before it moves, wraps (DDP) or shards (FSDP) the module, so the reference is placed
        with the policy, and a resumed run restores it from the checkpoint."""
        if self.reference is None:
            self.reference = reference_policy(self.lm, self.settings.uses_kl, self.loaded_reference)

    # ----------------------------------------------------------------------------- resuming
    def on_save_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        """Counters that continue across a resume, and the random generators, so the steps
        after a resume sample what an uninterrupted run would."""
        checkpoint["grpo"] = {
            "num_tokens": self.num_tokens,
            **self.nonfinite.state_dict(),
            **self.tied.state_dict(),
            "rng": gather_objects(rng_states()),  # one entry per process, in rank order
        }

    def on_load_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        state = checkpoint.get("grpo", {})
        self.num_tokens = int(state.get("num_tokens", 0))
        self.nonfinite.load_state_dict(state)
        self.tied.load_state_dict(state)
        self.restored_rng = state.get("rng")

    def on_fit_start(self) -> None:
        trained = sum(p.numel() for p in self.lm.trainable_parameters())
        log.info("GRPO trains %s parameters of the policy", f"{trained:,}")

    def on_train_start(self) -> None:
        # Restored here rather than on load: nothing else draws from them before the next step.
        if self.restored_rng is not None:
            saved = self.restored_rng
            # one entry per process (a checkpoint of a single process may hold a bare dict)
            set_rng_states(saved[rank()] if isinstance(saved, list) else saved)
            self.restored_rng = None
        elif rank() > 0:
            torch.manual_seed(torch.initial_seed() + rank())  # each process samples its own draws
        self.sampler.sync(self.lm)

    def on_validation_start(self) -> None:
        for sampler in {id(s.sampler): s.sampler for s in self.held_out.values()}.values():
            sampler.sync(self.lm)  # a sampler with its own weights scores the current policy

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
        """One rollout and its updates, phase by phase: roll out, score (advantages), the old
        and reference log-probs, then `algo.num_iterations` updates; `timing` gives the
        seconds per phase so far (`timing/<phase>`), logged with each update's metrics.

        On several processes each rolls out its share of the global batch (every prompt's G
        completions on one process); rewards and rollout statistics are gathered, so the
        advantages and the logged figures are those of the global batch."""
        started = time.perf_counter()
        episode, sampling = self.rollout_groups(batch)
        rollout = episode.rollout
        record = RolloutRecord.of(episode).gathered()  # every process's rows, in rank order
        everyone, advantages = self.score(record, rollout, len(episode.rewards))
        old_logps, ref_logps = self.fixed_log_probs(rollout)
        statistics = self.rollout_statistics(record, rollout, sampling)
        for _ in range(self.settings.num_iterations):
            if self.global_step >= self.trainer.max_steps > 0:
                break  # max_steps falls inside this rollout's updates
            update = self.optimizer_update(rollout, advantages, old_logps, ref_logps)
            reduced = update["reduced"]
            if update["skipped"]:
                continue
            metrics = {
                **timing(),
                **statistics,
                **reduced,
                "grad_norm": update["grad_norm"],
                "skipped_steps": self.nonfinite.skipped,
                "learning_rate": update["learning_rate"],
                "num_tokens": self.num_tokens,
                "mean_advantage": float(everyone.mean()),
                "step_time": time.perf_counter() - started,
            }
            metrics.update(aliased(metrics, self.settings.metric_aliases))
            self.log_to_loggers(metrics)
        self.log_dict(
            {"reward": statistics["reward"], "kl": reduced["kl"]},
            prog_bar=True,
            logger=False,
        )
        if (
            self.settings.samples_every_n_steps
            and self.global_step % self.settings.samples_every_n_steps
            < self.settings.num_iterations
        ):
            rows = sample_rows(episode, advantages, self.settings.group_size, self.global_step)
            rows = [row for part in gather_objects(rows) for row in part]
            log_samples_table(self.loggers, rows, self.global_step)

    def score(self, record: RolloutRecord, rollout: Rollout, rows: int) -> tuple[Tensor, Tensor]:
        """The advantages of the global batch (`record`: every process's rewards) and of this
        process's `rows`, on its device: the registered estimator's (or GDPO's per-function
        normalisation), the best `top_k_ratio` of each group kept, and with
        `mask_truncated_completions` cut completions' set to 0 after they counted in the
        baselines."""
        settings = self.settings
        if settings.multi_objective_aggregation == "normalize_then_sum":
            everyone = normalize_then_sum(record.parts, self.reward.weights, settings.group_size)
        else:
            everyone = estimate_advantages(
                settings.advantage_estimator,
                record.rewards,
                settings.group_size,
                record.lengths,
                settings.scale_rewards,
            )
        everyone = keep_top_k(everyone, record.rewards, settings.group_size, settings.top_k_ratio)
        first = rank() * rows  # every process holds as many rows
        advantages = everyone[first : first + rows].to(self.device)
        if settings.mask_truncated_completions:
            advantages = advantages.masked_fill(rollout.is_clipped.to(self.device), 0.0)
        return everyone, advantages

    def fixed_log_probs(self, rollout: Rollout) -> tuple[Tensor | None, Tensor | None]:
        """The log-probs that stay fixed over this rollout's updates: the sampling policy's
        (with several updates per rollout; None otherwise: ratio 1, and the sampler's
        correction reads the update's own, detached) and the reference's (None without a KL
        term)."""
        old_logps = None
        with phase("log_probs"):
            if self.settings.num_iterations > 1:  # one update: the pass's own, detached
                with torch.no_grad():
                    old_logps = self.lm.log_probs(rollout, self.temperature)[0]
            ref_logps = reference_log_probs(self.reference, rollout, self.temperature)
        return old_logps, ref_logps

    def rollout_statistics(
        self, record: RolloutRecord, rollout: Rollout, sampling: dict[str, float]
    ) -> dict[str, float]:
        """The rollout's logged figures (rewards, lengths, ties, sampling rounds), a warning
        when groups have tied too many steps in a row, and the tokens seen so far counted."""
        statistics = {**rollout_metrics(record, self.settings.group_size), **sampling}
        nothing_to_learn = self.tied.observe(
            statistics["frac_reward_zero_std"], self.settings.group_size
        )
        if nothing_to_learn and rank() == 0:
            log.warning(nothing_to_learn)
        statistics["tied_rollouts"] = self.tied.in_a_row
        tokens = rollout.prompt_mask.sum() + rollout.completion_mask.sum()
        self.num_tokens += int(sum_over_processes({"tokens": tokens})["tokens"])
        return statistics

    def optimizer_update(
        self,
        rollout: Rollout,
        advantages: Tensor,
        old_logps: Tensor | None,
        ref_logps: Tensor | None,
    ) -> dict[str, Any]:
        """One optimizer update: gradients over the passes, reduced over processes, clipped,
        and the step taken, or skipped (weights and optimizer state unchanged) where the loss
        or the gradient norm is not finite. Returns the reduced loss and metrics (`reduced`),
        `grad_norm`, `learning_rate` and whether it was `skipped`."""
        optimizer = self.optimizers()
        scheduler = self.lr_schedulers()
        optimizer.zero_grad()
        loss, loss_metrics, weights = self.accumulate_gradients(
            rollout, advantages, old_logps, ref_logps
        )
        learning_rate = float("nan")
        with phase("update"):
            grad_norm = torch.tensor(float("nan"))
            # a loss that is not finite on any process is not finite on all of them
            reduced = reduce_loss_metrics(loss, loss_metrics, weights)
            if math.isfinite(reduced["loss"]):
                if isinstance(self.trainer.strategy, DDPStrategy):
                    average_gradients(self.lm.trainable_parameters())
                grad_norm = self.clipped_gradient_norm(optimizer)
            finite = math.isfinite(reduced["loss"]) and bool(torch.isfinite(grad_norm))
            if finite:
                learning_rate = optimizer.param_groups[0]["lr"]
                optimizer.step()
                if scheduler is not None:
                    scheduler.step()
                self.sampler.sync(self.lm)  # e.g. vLLM loads the new adapter
            else:
                optimizer.zero_grad()  # the weights and optimizer state stay as they were
        if finite:
            self.nonfinite.passed()
        else:
            self.nonfinite.skip(self.global_step + 1, reduced["loss"], float(grad_norm))
        return {
            "reduced": reduced,
            "grad_norm": float(grad_norm),
            "learning_rate": learning_rate,
            "skipped": not finite,
        }

    def rollout_groups(self, batch: list[dict[str, Any]]) -> tuple[Episode, dict[str, float]]:
        """This step's episode: its prompts' groups; with `sampling_rounds` > 1 (DAPO's dynamic
        sampling) the batch holds that many batches of prompts, and groups whose rewards tie
        are replaced by groups of the next ones (`src.grpo.dynamic_sampling`). Every batch
        sampled is reported to the data where it takes feedback (`RolloutFeedback`:
        learnability sampling), whose `sampling/*` figures come back averaged."""

        group_size = self.settings.group_size
        datamodule = self.trainer.datamodule
        feedback = datamodule if isinstance(datamodule, RolloutFeedback) else None
        observed: list[dict[str, float]] = []  # sampling/* of each batch sampled

        def sample(rows: list[dict[str, Any]]) -> Episode:
            episode = run_episode(self.lm, self.sampler, self.policy, self.reward, rows, group_size)
            if feedback is not None:  # e.g. learnability sampling's success estimates
                observed.append(
                    feedback.observe_rollout(episode.rows, episode.reward_parts, group_size)
                )
            return episode

        if self.settings.sampling_rounds == 1:
            episode, metrics = sample(batch), {}
        else:
            pad = self.lm.tokenizer.pad_token_id
            episode, metrics = sample_with_spread(
                sample, batch, self.settings.sampling_rounds, group_size, pad
            )
        return episode, {**metrics, **mean_figures(observed)}

    def loss_mask(self, rollout: Rollout) -> Tensor:
        """[N, T] the tokens the loss counts: every completion token the policy wrote (not
        those a search inserted), less those of completions cut at the length limit when
        `mask_truncated_completions` is set (TRL's; DAPO's overlong filtering). Those
        completions still count in their group's baseline."""
        mask = rollout.action_mask
        if not self.settings.mask_truncated_completions:
            return mask
        return mask * (~rollout.is_clipped).to(mask.device).unsqueeze(1).to(mask.dtype)

    def corrects_sampler(self, rollout: Rollout) -> bool:
        """Whether the loss weighs tokens by the sampler's importance ratio (`sampler_is_cap`
        set and the sampler reported its own log-probs)."""
        return self.settings.sampler_is_cap is not None and rollout.sampler_logps is not None

    def accumulate_gradients(
        self,
        rollout: Rollout,
        advantages: Tensor,
        old_logps: Tensor | None,
        ref_logps: Tensor | None,
    ) -> tuple[Tensor, dict[str, Tensor], dict[str, float]]:
        """Forward and backward of this process's loss in passes of at most
        `max_tokens_per_pass` tokens (`src.grpo.passes`): the gradients add up to those of one
        pass over every row, while only one pass's activations are held at a time. Returns the
        loss (detached), its metrics and their weights, combined over the passes as
        `policy_loss` would give them for the whole batch.

        Under DDP its own reduction (which expects one backward per forward) is blocked; the
        caller averages the gradients once the loss is known to be finite. Every process runs
        as many passes, as FSDP gathers and reduces the weights in each."""
        plan = self.update_plan(rollout, advantages)
        results = []
        for rows in self.pass_rows(rollout, plan):
            with phase("log_probs"):
                loss, metrics, weights = self.policy_loss(
                    rollout, advantages, old_logps, ref_logps, plan, rows
                )
            with phase("update"):
                strategy = self.trainer.strategy
                if isinstance(strategy, DDPStrategy):
                    with strategy.block_backward_sync():
                        self.manual_backward(loss)
                else:
                    self.manual_backward(loss)
            results.append((loss.detach(), metrics, weights))
        return combine_passes(results)

    def pass_rows(self, rollout: Rollout, plan: UpdatePlan) -> list[Tensor]:
        """Boolean row masks of the passes over the rows the plan trains. On several
        processes, each runs as many passes as the one that needs most; one with fewer
        trained rows than that runs all its rows (those left out add nothing)."""
        trained = plan.trained
        passes = token_passes(rollout.select(trained), self.settings.max_tokens_per_pass)
        if world_size() > 1:
            while len(set(counts := gather_objects(len(passes)))) > 1:
                if int(trained.sum()) < max(counts):
                    trained = torch.ones_like(trained)
                part = rollout.select(trained)
                passes = token_passes(part, self.settings.max_tokens_per_pass, at_least=max(counts))
        index = trained.nonzero().flatten()
        masks = []
        for rows in passes:
            mask = torch.zeros_like(trained)
            mask[index[rows.to(index.device)]] = True
            masks.append(mask)
        return masks

    def clipped_gradient_norm(self, optimizer: Any) -> Tensor:
        """The total gradient norm before clipping (TRL's `grad_norm`), over the whole model
        (under FSDP each process holds a shard, and the norm is summed over them); gradients
        are clipped to `max_grad_norm` when it is set and the norm is finite."""
        params = [p for group in optimizer.param_groups for p in group["params"]]
        params = [p for p in params if p.grad is not None]
        sharded = isinstance(self.trainer.strategy, FSDPStrategy)
        if not params and not sharded:
            return torch.tensor(0.0)
        if sharded:
            norm = sharded_norm([p.grad for p in params]).to(self.device)
        else:
            norm = torch.nn.utils.get_total_norm([p.grad for p in params])
        if params and self.settings.max_grad_norm and torch.isfinite(norm):
            torch.nn.utils.clip_grads_with_norm_(params, self.settings.max_grad_norm, norm)
        return norm.detach().float().cpu()

    def update_plan(self, rollout: Rollout, advantages: Tensor) -> UpdatePlan:
        """Which rows go through the network, and the counts the loss and metrics need.

        Without a KL term a completion whose advantage is 0 adds nothing to the loss or its
        gradient, so with `skip_zero_advantage` only the others go through the network. A
        batch where every advantage is 0 is run whole, so its metrics stay complete; on
        several processes one whose rows all have advantage 0 while others' do not runs its
        rows whole (they add 0) and its entropy does not count. `bnpo`/`dapo` divide by the
        global batch's token count over the number of processes, so the averaged gradient is
        that of one process."""
        trained = advantages != 0
        skipping = self.settings.skip_zero_advantage and not self.settings.uses_kl
        all_tokens = self.loss_mask(rollout).sum()
        # one collective for both: the global token count and whether any process trains rows
        total = sum_over_processes({"tokens": all_tokens, "trained": trained.any()})
        anywhere = skipping and total["trained"] > 0
        counted = bool(trained.any()) or not anywhere  # whether this process's entropy counts
        if not (skipping and trained.any()):
            trained = torch.ones_like(trained)  # a KL term, or rows with nothing to learn
        threshold = None
        if self.settings.top_entropy_quantile < 1.0:
            threshold = self.entropy_threshold(rollout)
        return UpdatePlan(trained, counted, all_tokens, total["tokens"] / world_size(), threshold)

    def entropy_threshold(self, rollout: Rollout) -> float:
        """`algo.top_entropy_quantile`'s threshold over every counted token of the update, on
        every process (one forward without gradient over all rows, as the passes may leave
        some rows out)."""
        with torch.no_grad():
            entropy = self.lm.log_probs(rollout, self.temperature, with_entropy=True)[1]
        counted = entropy[self.loss_mask(rollout).bool()].float().cpu()
        everyone = torch.cat(gather_objects(counted))
        return entropy_threshold(everyone, self.settings.top_entropy_quantile)

    def policy_loss(
        self,
        rollout: Rollout,
        advantages: Tensor,
        old_logps: Tensor | None,
        ref_logps: Tensor | None,
        plan: UpdatePlan | None = None,
        rows: Tensor | None = None,
    ) -> tuple[Tensor, dict[str, Tensor], dict[str, float]]:
        """The GRPO loss of this process's rows (`rows`, a boolean mask, or all the rows
        `plan` trains), its metrics (entropy included) and the weights that reduce each metric
        over processes (`reduce_loss_metrics`). The loss and its token-mean metrics divide by
        the whole update's counts (`Denominators`), so the losses of passes over disjoint rows
        add up to that of the whole batch; entropy is the mean over the rows run."""
        plan = plan or self.update_plan(rollout, advantages)
        trained = plan.trained if rows is None else rows
        all_tokens, num_tokens, counted = plan.all_tokens, plan.num_tokens, plan.counted
        part = rollout.select(trained) if not trained.all() else rollout
        width = part.completion_ids.size(1)
        logps, entropy = self.lm.log_probs(part, self.temperature, with_entropy=True)
        old = None if old_logps is None else old_logps[trained, :width]
        sampler_weights, sampler_metrics = None, {}
        if part.sampler_logps is not None:  # before this rollout's updates: old, or these
            before = old if old is not None else logps.detach()
            sampler_metrics = sampler_mismatch(before, part.sampler_logps, part.action_mask)
            if self.corrects_sampler(rollout):
                sampler_weights, weight_metrics = sampler_correction(
                    before, part.sampler_logps, part.action_mask, self.settings.sampler_is_cap
                )
                sampler_metrics.update(weight_metrics)
        if plan.entropy_threshold is not None:  # only the high-entropy tokens' policy term
            kept = (entropy >= plan.entropy_threshold).to(logps.dtype)
            sampler_weights = kept if sampler_weights is None else sampler_weights * kept
        loss, metrics = grpo_loss(
            TokenLogProbs(logps, old, None if ref_logps is None else ref_logps[trained, :width]),
            advantages[trained],
            self.loss_mask(part),
            self.settings.objective(self.max_completion_length),
            Denominators(
                tokens=num_tokens,  # the global batch's / processes
                sequences=rollout.completion_ids.size(0),  # this process's, one share of P
                metric_tokens=all_tokens,  # this process's: reduce_loss_metrics weighs them
            ),
            sampler_weights,
        )
        part_mask = part.action_mask.to(entropy.dtype)
        part_tokens = part_mask.sum()
        metrics["entropy"] = (entropy.detach() * part_mask).sum() / part_tokens.clamp(min=1)
        metrics["mean_log_prob"] = (logps.detach() * part_mask).sum() / part_tokens.clamp(min=1)
        metrics.update(sampler_metrics)
        weights = {
            "tokens": float(all_tokens),  # clip ratios and kl are over the whole rollout's
            "part_tokens": float(part_tokens) if counted else 0.0,  # entropy: rows trained on
        }
        return loss, metrics, weights

    def log_to_loggers(self, metrics: dict[str, float]) -> None:
        """Write metrics at the current optimizer step to every logger."""
        for logger in self.loggers:
            logger.log_metrics(metrics, step=self.global_step)

    # ----------------------------------------------------------------------------- evaluation
    def add_held_out(self, prefix: str, role: Role, sampler: Sampler) -> None:
        """Score a further held-out split (the datamodule's next held-out loader) with `role`
        and `sampler`, e.g. kinds never trained on searched in their own textbook, logged as
        `<prefix>/<name>` beside `eval/<name>`."""
        self.held_out[prefix] = GreedyScorer(sampler, role, self.reward)

    def validation_step(
        self, batch: list[dict[str, Any]], batch_idx: int, dataloader_idx: int = 0
    ) -> None:
        list(self.held_out.values())[dataloader_idx].score(self.lm, batch)

    def on_validation_epoch_end(self) -> None:
        results = {
            f"{prefix}/{name}": value
            for prefix, scorer in self.held_out.items()
            for name, value in scorer.means().items()
        }
        if self.trainer.sanity_checking:
            return
        self.log_to_loggers(results)
        self.log_dict(results, prog_bar=False, logger=False)
        self.evaluated_step = self.global_step


def aliased(metrics: dict[str, float], aliases: dict[str, str]) -> dict[str, float]:
    """The metrics again under extra names (`algo.metric_aliases`: extra name -> ours)."""
    unknown = sorted(name for name in aliases.values() if name not in metrics)
    if unknown:
        raise ConfigError(
            f"algo.metric_aliases names metrics a step does not log: {unknown}; "
            f"it logs {sorted(metrics)}"
        )
    return {alias: metrics[name] for alias, name in aliases.items()}
