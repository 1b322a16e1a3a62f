"""k sampled completions a prompt, read as the room's figures (`room.py`): the pre-flight's
(`python -m src.preflight`), a training run's at its start and end, and `src.eval`'s.

A `RoomReading` says which reward function is the success (its score 1), which one says a
completion is well-formed, and how an answer is read out of an outcome (`eval.extract`; the
outcome itself where that is null, e.g. a rewriter's frozen answer letter). `auto` takes
`accuracy` and `well_formed` where the run's reward has them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import torch
from rich.progress import Progress

from src.data.learnability import SUCCESS  # a success function's score at or above it
from src.evaluation.room import Group, split_figures
from src.model.network import PolicyNetwork
from src.policy.episode import Episode, run_episode
from src.policy.role import Role
from src.reward.combine import CombinedReward
from src.rollout.sampler import Sampler
from src.utils.errors import ConfigError

Extractor = Callable[[str], str | None]
AUTO = "auto"
AUTO_NAMES = {"room.success": "accuracy", "room.form": "well_formed"}


@dataclass(frozen=True)
class RoomReading:
    """How a completion is read for the room: its success, its form and its answer."""

    success: str | None  # the reward function whose score 1 is a success; None: a graded reward
    form: str | None  # the reward function whose score 1 is the form; None: no form part
    extract: Extractor | None  # outcome -> answer; None: the outcome (stripped) is the answer

    @classmethod
    def of(
        cls,
        reward: CombinedReward,
        success: str | None,
        form: str | None,
        extract: Extractor | None,
    ) -> RoomReading:
        """The reading of `room.success` and `room.form` for this reward: `auto` takes the
        conventional name where the reward has it (and none where not); a name must be one
        of the reward's functions."""
        return cls(
            named(reward, "room.success", success), named(reward, "room.form", form), extract
        )

    def answer(self, outcome: str) -> str | None:
        """The answer an outcome gives, None where it gives none."""
        if self.extract is not None:
            return self.extract(outcome)
        return outcome.strip() or None


def named(reward: CombinedReward, key: str, value: str | None) -> str | None:
    """The reward function `key` names: `auto`'s conventional one where present, else None."""
    if value is None:
        return None
    if value == AUTO:
        return AUTO_NAMES[key] if AUTO_NAMES[key] in reward.functions else None
    if value not in reward.functions:
        raise ConfigError(
            f"{key}={value} names no function of this run's reward (it has "
            f"{', '.join(sorted(reward.functions))}): name one of them, auto, or null"
        )
    return value


def episode_groups(episode: Episode, k: int, reading: RoomReading) -> list[Group]:
    """The episode's completions as one `Group` per prompt (rows i*k .. i*k+k-1)."""
    groups = []
    clipped = episode.rollout.is_clipped.tolist()
    for start in range(0, len(episode.outcomes), k):
        span = range(start, start + k)
        row = episode.rows[start]
        successes = None
        if reading.success is not None:
            part = episode.reward_parts[reading.success]
            successes = [float(float(part[i]) >= SUCCESS) for i in span]
        formed = None
        if reading.form is not None:
            formed = [float(episode.reward_parts[reading.form][i]) >= SUCCESS for i in span]
        options = row.get("options")
        groups.append(
            Group(
                rewards=[float(episode.rewards[i]) for i in span],
                successes=successes,
                answers=[reading.answer(episode.outcomes[i]) for i in span],
                well_formed=formed,
                parts={
                    name: [float(p[i]) for i in span] for name, p in episode.reward_parts.items()
                },
                clipped=[bool(clipped[i]) for i in span],
                texts=[episode.rollout.completions[i] for i in span],
                chance=1.0 / len(options) if isinstance(options, dict) and options else None,
            )
        )
    return groups


@contextmanager
def own_generator(seed: int) -> Iterator[None]:
    """Draw from generators seeded by `seed` inside, and leave the caller's (CPU and the
    current CUDA device's) as they were: sampled evaluations change no training draw."""
    devices = [torch.cuda.current_device()] if torch.cuda.is_available() else []
    with torch.random.fork_rng(devices=devices):
        torch.manual_seed(seed)
        yield


@dataclass
class SampledSplit:
    """One split's sampled groups, its figures, and its prompts (for examples)."""

    groups: list[Group]
    figures: dict[str, float]
    prompts: list[str]


@torch.no_grad()
def sample_split(
    network: PolicyNetwork,
    parts: tuple[Sampler, Role, CombinedReward],
    rows: list[dict[str, Any]],
    k: int,
    batch_size: int,
    reading: RoomReading,
    seed: int,
    label: str = "room",
) -> SampledSplit:
    """`k` sampled completions for each of `rows`, `batch_size` prompts a rollout, drawn from
    generators of their own seeded by `seed` (`own_generator`), read as groups and summed up
    as the room's figures (`room.split_figures`)."""
    sampler, role, reward = parts
    groups: list[Group] = []
    prompts: list[str] = []
    with own_generator(seed), Progress(transient=True) as progress:
        task = progress.add_task(f"{label}: {k} samples a prompt", total=len(rows))
        for start in range(0, len(rows), batch_size):
            batch = rows[start : start + batch_size]
            episode = run_episode(network, sampler, role, reward, batch, k)
            groups += episode_groups(episode, k, reading)
            prompts += episode.prompts
            progress.update(task, advance=len(batch))
    return SampledSplit(groups, split_figures(groups), prompts)
