"""How much of the room a held-out reward had GRPO closed: `eval/<name>_room_closed`.

A reward function's room on the held-out rows is the distance from the policy's greedy score
at the first evaluation (step 0) to the score the rows' own answers get (`eval/<name>_gold`):
for `task=char_diffusion`, the judge's mean score of the real windows, which a fill restoring
every character would reach. Each later evaluation logs the share of that room closed,
(score - score at step 0) / (gold - score at step 0): 0 at the start, 1 where the greedy fills
score as the real text does, negative where the score fell. docs/recipes/char_diffusion.md
states the recipe's bar in it.
"""

from __future__ import annotations

from typing import Any

import lightning as L
import torch

from src.grpo.module import GRPOModule


class RoomClosed(L.Callback):
    """After every held-out evaluation, logs `eval/<function>_gold` (once) and
    `eval/<function>_room_closed` at the evaluation's step."""

    def __init__(self, function: str) -> None:
        self.function = function
        self.start: float | None = None  # the first evaluation's score; kept in checkpoints
        self.gold: float | None = None

    def on_validation_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if trainer.sanity_checking or not isinstance(pl_module, GRPOModule):
            return
        score = trainer.callback_metrics.get(f"eval/{self.function}")
        if score is None:
            return
        if self.gold is None:
            self.gold = gold_score(pl_module, trainer.datamodule.val_rows, self.function)
        if self.start is None:
            self.start = float(score)
        metrics = {
            f"eval/{self.function}_gold": self.gold,
            f"eval/{self.function}_room_closed": room_closed(float(score), self.start, self.gold),
        }
        pl_module.log_to_loggers(metrics)

    def state_dict(self) -> dict[str, Any]:
        return {"start": self.start, "gold": self.gold}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self.start, self.gold = state_dict.get("start"), state_dict.get("gold")


def room_closed(score: float, start: float, gold: float) -> float:
    """(score - start) / (gold - start); NaN where the start leaves no room (start >= gold)."""
    room = gold - start
    return (score - start) / room if room > 0 else float("nan")


@torch.no_grad()
def gold_score(module: GRPOModule, rows: list[dict[str, Any]], function: str) -> float:
    """The mean score `function` gives the rows' own answers, each read by the role as its
    completion would be (an infill row's answer is its masked characters: the real window)."""
    answers = [str(row["answer"]) for row in rows]
    outcomes = module.policy.outcomes(answers, rows, module.lm)
    lengths = [len(answer) for answer in answers]  # characters: a character model's tokens
    scores = module.reward(outcomes.texts, rows, lengths, outcomes.details)
    return float(scores.parts[function].double().mean())
