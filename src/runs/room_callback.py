"""A training run's room to learn, before and after: `room/<split>/<figure>` at step 0 and at the
last step, and `room/<split>/room_closed` at the end.

At the first evaluation (step 0) the held-out rows of every held-out split (`eval` ->
validation, `eval_unseen` -> unseen) are sampled `room.k` times each and read as the
pre-flight reads them (src/evaluation/room.py); at the evaluation of the last step again, with
room closed = (pass@1 after - pass@1 before) / room before (not logged where there was no room),
its 95 % margin from the same prompts' changes (`room_closed_margin`), and pass@k after beside it (a policy that narrows loses it). A continued run's first part logs
its end figures where it stopped on purpose (`trainer.max_steps` reached), as any run's end.
The samples draw from a generator of their own (`room.seed`), so turning this on or off changes
none of the training's draws.
"""

from __future__ import annotations

import math
from typing import Any

import lightning as L

from src.evaluation.greedy import GreedyScorer
from src.evaluation.room import prompt_pass_at_1, room_closed, room_closed_margin
from src.evaluation.sampled import Extractor, RoomReading, SampledSplit, sample_split
from src.grpo.module import GRPOModule

SPLIT_OF = {"eval": "validation", "eval_unseen": "unseen"}  # held-out prefix -> split


class SampledRoom(L.Callback):
    """Samples the held-out rows at step 0 and at the last step (see the module docstring)."""

    def __init__(
        self,
        enabled: bool,
        k: int,
        success: str | None,
        form: str | None,
        extract: Extractor | None,
        max_rows: int | None,
        batch_size: int,
        seed: int,
    ) -> None:
        self.enabled, self.k, self.max_rows, self.batch_size = enabled, k, max_rows, batch_size
        self.names = (success, form, extract)
        self.seed = seed
        self.before: dict[str, dict[str, float]] = {}  # split -> step-0 figures; in checkpoints
        self.before_rates: dict[str, list[float]] = {}  # split -> step-0 pass@1 of each prompt

    def on_validation_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if not self.enabled or trainer.sanity_checking or not isinstance(pl_module, GRPOModule):
            return
        step = trainer.global_step
        last = step > 0 and trainer.max_steps is not None and step >= trainer.max_steps
        if (step == 0 and not self.before) or last:
            metrics = self.measure(trainer, pl_module, before=step == 0)
            pl_module.log_to_loggers(metrics)

    def measure(self, trainer: L.Trainer, module: GRPOModule, before: bool) -> dict[str, float]:
        """Every held-out split's figures, and after training the room closed."""
        datamodule: Any = trainer.datamodule
        metrics: dict[str, float] = {}
        was_training = module.lm.training
        module.lm.eval()
        for prefix, scorer in module.held_out.items():
            split = SPLIT_OF.get(prefix, prefix)
            rows = datamodule.split_rows(split)
            rows = rows[: self.max_rows] if self.max_rows else rows
            sampled = self.sample(module, scorer, rows)
            figures, rates = sampled.figures, prompt_pass_at_1(sampled.groups)
            if before:
                self.before[split], self.before_rates[split] = figures, rates
            elif split in self.before:
                start = self.before[split]
                closed = room_closed(figures["pass_at_1"], start["pass_at_1"], start["room"])
                if math.isfinite(closed):  # no room at the start: nothing to close
                    figures["room_closed"] = closed
                    started = self.before_rates.get(split)
                    if started is not None and len(started) == len(rates):
                        closed_margin = room_closed_margin(rates, started, start["room"])
                        figures["room_closed_margin"] = closed_margin
                if "pass_at_k" in figures:
                    figures["pass_at_k_change"] = figures["pass_at_k"] - start["pass_at_k"]
            metrics.update({f"room/{split}/{name}": value for name, value in figures.items()})
        module.lm.train(was_training)
        return metrics

    def sample(
        self, module: GRPOModule, scorer: GreedyScorer, rows: list[dict[str, Any]]
    ) -> SampledSplit:
        """k samples of each row by the scorer's sampler and role, the policy as it is now."""
        success, form, extract = self.names
        reading = RoomReading.of(scorer.reward, success, form, extract)
        parts = (scorer.sampler, scorer.role, scorer.reward)
        return sample_split(module.lm, parts, rows, self.k, self.batch_size, reading, self.seed)

    def state_dict(self) -> dict[str, Any]:
        return {"before": self.before, "before_rates": self.before_rates}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self.before = dict(state_dict.get("before") or {})
        self.before_rates = dict(state_dict.get("before_rates") or {})
