"""Steps a task runs after its stages and before GRPO (`before_grpo:`), the one way a recipe's
own training steps reach `src.train` and `src.eval` without either naming them.

Each entry of `before_grpo` is a `_target_` building a `BeforeGrpo`. It is built once, right
after the settings check and before any data or model loads (`runs/parts.py`, which keeps the
steps in the run's parts), so its constructor refuses settings that cannot work; `src.train`
then hands it the run's parts before GRPO (it may train and return parts with another reward,
e.g. scoring by a later judge), and `src.eval` before scoring (it trains nothing there). task=char_diffusion's adversarial rounds are one.
"""

from __future__ import annotations

from typing import Protocol, TypeVar

from hydra.errors import InstantiationException
from omegaconf import DictConfig

from src.utils.config import build
from src.utils.errors import UserError, unwrapped

# the run's parts (`src.runs.parts.RunParts`), left open here: parts.py builds these steps
# and keeps them, so this module cannot import it
Parts = TypeVar("Parts")


class BeforeGrpo(Protocol[Parts]):
    """A recipe's step between its stages and GRPO."""

    def before_training(self, cfg: DictConfig, parts: Parts) -> Parts:
        """Run the step (or load it from its cache); the parts GRPO trains with."""
        ...

    def before_evaluation(self, cfg: DictConfig, parts: Parts) -> Parts:
        """The parts `src.eval` scores with, as GRPO trained with them; trains nothing."""
        ...


def before_grpo_steps(cfg: DictConfig) -> list[BeforeGrpo]:
    """The task's `before_grpo` steps, built in order; a setting one refuses is raised as its
    own one-line error, not inside Hydra's instantiation message."""
    steps = []
    for node in (cfg.get("before_grpo") or {}).values():
        try:
            steps.append(build(node))
        except InstantiationException as error:
            if isinstance(unwrapped(error), UserError):
                raise unwrapped(error) from None
            raise
    return steps


def before_training(steps: list[BeforeGrpo], cfg: DictConfig, parts: Parts) -> Parts:
    """`parts` after every one of the built `before_grpo` steps has run, in order."""
    for step in steps:
        parts = step.before_training(cfg, parts)
    return parts


def before_evaluation(steps: list[BeforeGrpo], cfg: DictConfig, parts: Parts) -> Parts:
    """`parts` as every one of the built `before_grpo` steps hands them to scoring."""
    for step in steps:
        parts = step.before_evaluation(cfg, parts)
    return parts
