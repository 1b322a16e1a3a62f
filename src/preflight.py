"""Hydra entry point: `python -m src.preflight task=NAME [overrides]`, the room to learn before
a run. GRPO reinforces only what the policy already samples: this samples the policy a run
would start from (after its cached SFT warm start and stages), `room.k` completions for the
first `room.rows` prompts of each split in `room.splits`, and reports per split pass@1, pass@k,
maj@k (or best-of-k for a graded reward), the room, the form's part, the groups whose rewards
differ, learnability, each reward's spread, truncated and distinct completions, and one verdict
line. Logged as `preflight/<split>/<figure>` in an MLflow run tagged `stage=preflight`;
`preflight.json` holds the figures and the verdicts. docs/room.md says what each figure means.
"""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path
from typing import Any

import hydra
from omegaconf import DictConfig

from src.evaluation.room import verdict
from src.evaluation.sampled import RoomReading, SampledSplit, sample_split
from src.model.network import PolicyNetwork
from src.model.saved import saved_model_settings
from src.pretraining.stages import run_stages
from src.runs.cli import run_cli
from src.runs.hooks import before_evaluation
from src.runs.parts import RunParts, build_run_parts, log_figures, prepare_roles, warm_started
from src.runs.record import log_artifacts, recorded_run
from src.tracking.run_logger import mlflow_loggers
from src.tracking.sweep import sweep_job
from src.utils.config import build

log = logging.getLogger(__name__)
SHOWN = 300  # characters of a prompt or completion shown in the report


def preflight(cfg: DictConfig) -> dict[str, dict[str, float]]:
    """Sample the starting policy on each split; print, log and return {split: figures}."""
    started = time.perf_counter()
    parts = build_run_parts(cfg)  # bad settings and data fail here, before any model loads
    room = parts.room
    splits = [s for s in room.splits if s != "unseen" or parts.datamodule.unseen_rows]
    reading = RoomReading.of(parts.reward, room.success, room.form, parts.evaluation.extractor())
    results: dict[str, SampledSplit] = {}
    with recorded_run(parts.loggers, cfg, {"stage": "preflight"}, parts.datamodule.report):
        parts, lm = starting_policy(cfg, parts)
        for split in splits:
            rows = parts.datamodule.split_rows(split)[: room.rows]
            unseen = split == "unseen" and parts.unseen is not None
            role, sampler = parts.unseen if unseen else (parts.policy, parts.sampler)
            results[split] = sample_split(
                lm, (sampler, role, parts.reward), rows, room.k, room.batch_size,
                reading, room.seed, label=f"pre-flight {split}",
            )  # fmt: skip
        seconds = time.perf_counter() - started
        figures = {split: result.figures for split, result in results.items()}
        verdicts = {split: verdict(f, split) for split, f in figures.items()}
        record(parts.loggers, figures, verdicts, seconds, Path(cfg.paths.run_dir))
    print(report(results, verdicts, reading, seconds), flush=True)
    return figures


def starting_policy(cfg: DictConfig, parts: RunParts) -> tuple[RunParts, PolicyNetwork]:
    """The parts and policy GRPO would start from: after the cached SFT warm start (trained
    first where `sft.enabled` and not cached), the task's stages and its `before_grpo` steps as
    `src.eval` takes them (cached), the roles prepared."""
    started: dict[str, Any] = {}  # the model settings of the warm start (the config unchanged)
    if parts.sft.enabled:
        folder = warm_started(cfg, parts)
        started = saved_model_settings(folder)
    run_stages(cfg, parts.datamodule, parts.loggers)
    parts = before_evaluation(parts.before_grpo, cfg, parts)
    lm = build(cfg.model, **started)
    lm.eval()
    log_figures(parts.loggers, prepare_roles(parts, lm))
    return parts, lm


def record(
    loggers: list[Any],
    figures: dict[str, dict[str, float]],
    verdicts: dict[str, str],
    seconds: float,
    folder: Path,
) -> None:
    """`preflight/<split>/<figure>` and `preflight/seconds` at step 0, the verdicts as tags,
    and `preflight.json` as an artifact."""
    metrics = {f"preflight/{s}/{name}": v for s, f in figures.items() for name, v in f.items()}
    metrics["preflight/seconds"] = seconds
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "preflight.json"
    saved = {"figures": figures, "verdicts": verdicts, "seconds": seconds}
    path.write_text(json.dumps(saved, indent=2))
    for logger in loggers:
        logger.log_metrics(metrics, step=0)
    for logger in mlflow_loggers(loggers):
        for split, line in verdicts.items():
            logger.experiment.set_tag(logger.run_id, f"preflight.{split}", line[:5000])
    log_artifacts(loggers, path)


ROWS = (  # (figure, label) in the report's order; a figure no split has is left out
    ("prompts", "prompts"),
    ("pass_at_1", "pass@1 (mean success; graded: mean reward)"),
    ("maj_at_k", "maj@k"),
    ("pass_at_k", "pass@k"),
    ("best_of_k", "best of k (total reward)"),
    ("room", "room"),
    ("well_formed", "well-formed"),
    ("right_among_well_formed", "right among well-formed"),
    ("maj_at_k_well_formed", "maj@k of the well-formed"),
    ("form_room", "form room"),
    ("answer_room", "answer room"),
    ("chance", "a guess"),
    ("signal", "groups whose rewards differ"),
    ("learnability", "learnability p(1-p)"),
    ("truncated", "truncated"),
    ("distinct", "distinct completions"),
)


def report(
    results: dict[str, SampledSplit], verdicts: dict[str, str], reading: RoomReading, seconds: float
) -> str:
    """The printed report: a figure per line, a split per column, each reward's spread, the
    verdicts, and for each split a prompt with a completion that succeeds and one that fails."""
    splits = list(results)
    k = int(next(iter(results.values())).figures.get("k", 0)) if results else 0
    lines = ["", f"=== pre-flight: {k} samples a prompt of the policy a run starts from ==="]
    lines.append("figure".ljust(44) + "".join(split.rjust(12) for split in splits))
    names = [name for name, _ in ROWS] + sorted(
        {n for r in results.values() for n in r.figures if "/" in n}
    )
    labels = dict(ROWS)
    for name in names:
        values = [results[split].figures.get(name) for split in splits]
        if all(value is None for value in values):
            continue
        cells = "".join("-".rjust(12) if v is None else f"{v:12.3f}" for v in values)
        lines.append(labels.get(name, name).ljust(44) + cells)
    lines.append(f"success: {reading.success or 'graded (total reward)'}; form: {reading.form}")
    lines += [f"verdict ({split}): {line}" for split, line in verdicts.items()]
    for split, result in results.items():
        lines += example(split, result)
    lines.append(f"seconds: {seconds:.1f}")
    return "\n".join(lines)


def example(split: str, result: SampledSplit) -> list[str]:
    """A prompt of the split whose completions differ most, its best and worst completion."""
    if not result.groups:
        return []
    index = max(
        range(len(result.groups)),
        key=lambda i: max(result.groups[i].rewards) - min(result.groups[i].rewards),
    )
    group = result.groups[index]
    best = max(range(group.size), key=lambda i: group.rewards[i])
    worst = min(range(group.size), key=lambda i: group.rewards[i])
    texts = group.texts or [""] * group.size
    return [
        f"example ({split}): prompt {short(result.prompts[index], tail=True)!r}",
        f"    best  ({group.rewards[best]:.3f}): {short(texts[best])!r}",
        f"    worst ({group.rewards[worst]:.3f}): {short(texts[worst])!r}",
    ]


def short(text: str, tail: bool = False) -> str:
    """The first `SHOWN` characters of a text, or with `tail` its last (a prompt's question)."""
    if len(text) <= SHOWN:
        return text
    return "..." + text[-SHOWN:] if tail else text[:SHOWN] + "..."


@hydra.main(version_base="1.3", config_path="../conf", config_name="train")
def main(cfg: DictConfig) -> Any:
    """Command-line entry: `python -m src.preflight task=medmcqa room.rows=16 room.k=8`."""
    with sweep_job(cfg):
        preflight(cfg)
    return None


if __name__ == "__main__":
    run_cli(main)
