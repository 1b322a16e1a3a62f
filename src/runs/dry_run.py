"""`dry_run=true`: load everything, run one rollout through the whole pipeline, print what it
made, and stop before any update or save. A cheap check that a recipe is wired as meant."""

from __future__ import annotations

import json
import resource
import sys
import textwrap

import torch

from src.model.network import PolicyNetwork
from src.policy.episode import Episode, run_episode
from src.runs.parts import RunParts
from src.utils.per_machine import choice_lines
from src.utils.timing import PhaseTimer, phase, phase_timer

SHOWN = 400  # characters of a prompt or a plan shown in the report


def dry_run(parts: RunParts, network: PolicyNetwork) -> dict[str, float]:
    """One rollout of the first training batch, scored, with log-probs taken (no gradient);
    prints the report and returns its figures (mean reward, seconds per phase)."""
    rows = parts.datamodule.train_rows[: parts.datamodule.settings.batch_size]
    group_size = parts.algo.group_size
    with phase_timer() as timer:
        episode = run_episode(network, parts.sampler, parts.policy, parts.reward, rows, group_size)
        with phase("log_probs"), torch.no_grad():
            logps = network.log_probs(episode.rollout, parts.sampler.temperature)[0]
    text = report(episode, group_size, tuple(logps.shape), timer)
    if parts.notes:
        text += "\nstages:\n" + "\n".join(f"    {note}" for note in parts.notes)
    if lines := choice_lines():
        text += "\nper-machine choices:\n" + "\n".join(f"    {line}" for line in lines)
    print(text, file=sys.stdout, flush=True)
    return {"reward": float(episode.rewards.mean()), **timer.metrics()}


def report(
    episode: Episode, group_size: int, logps_shape: tuple[int, ...], timer: PhaseTimer
) -> str:
    """The dry run's text: the first prompt (and its plan), its completions with what the role
    did and their rewards, tensor shapes, seconds per phase and peak memory."""
    row = episode.rows[0]
    lines = ["", "=== dry run: one rollout, no update ==="]
    if "plan" in row:
        lines += ["plan:", indent(str(row["plan"]))]
    lines += ["prompt:", indent(episode.prompts[0])]
    for i in range(group_size):
        lines.append(f"completion {i + 1}:")
        lines.append(indent(episode.rollout.completions[i]))
        for key, value in episode.details[i].items():
            lines.append(f"    {key}: {json.dumps(value, ensure_ascii=False, default=str)}")
        parts = {name: round(float(scores[i]), 3) for name, scores in episode.reward_parts.items()}
        lines.append(
            f"    outcome: {episode.outcomes[i]!r}  reward: {float(episode.rewards[i]):.3f} {parts}"
        )
    rollout = episode.rollout
    lines += [
        "shapes: "
        + ", ".join(
            f"{name} {tuple(value.shape)}"
            for name, value in (
                ("prompt_ids", rollout.prompt_ids),
                ("completion_ids", rollout.completion_ids),
                ("rewards", episode.rewards),
            )
        )
        + f", log_probs {logps_shape}",
        "seconds: " + ", ".join(f"{name} {sec:.2f}" for name, sec in timer.seconds.items()),
        f"peak memory: {peak_memory()}",
    ]
    return "\n".join(lines)


def indent(text: str) -> str:
    """Text shortened to `SHOWN` characters and indented for the report."""
    short = text if len(text) <= SHOWN else text[:SHOWN] + " ..."
    return textwrap.indent(short, "    ")


def peak_memory() -> str:
    """Peak resident memory of this process (and of the GPU, when one is used)."""
    text = f"{resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024**2:.2f} GiB RSS"
    if torch.cuda.is_available():
        text += f", {torch.cuda.max_memory_allocated() / 1024**3:.2f} GiB GPU"
    return text
