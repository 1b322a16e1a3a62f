"""Hydra entry point: `python -m src.eval [overrides]` scores model heads on held-out rows.

Heads are the base model and any saved adapters (`eval.adapters.<head>=FOLDER`), by default
the pipeline's SFT and GRPO adapters; a head may also be the base model scored with other
policy settings (`eval.policy_overrides.<head>`, e.g. the rewriter's question-only baseline).
Each head's role prepares the rows first (a rewriter's plans come from their cache). Every head answers greedily; `eval_results.jsonl` keeps
the raw generation and the extracted answer per row, `eval_summary.json` the means per head,
and one MLflow run holds both with `eval/<head>/<reward>` metrics.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import hydra
from omegaconf import DictConfig

from src.data.files import jsonl_line
from src.evaluation.greedy import GreedyScorer
from src.evaluation.room import prompt_pass_at_1, room_closed, room_closed_margin
from src.evaluation.sampled import RoomReading, sample_split
from src.evaluation.scoring import score_head
from src.evaluation.settings import EvalSettings, RoomSettings
from src.model.network import PolicyNetwork
from src.model.saved import saved_model_settings
from src.policy.role import Role, SearchingRole
from src.pretraining.stages import require_trained_stages
from src.rollout.sampler import Sampler
from src.runs.cli import run_cli
from src.runs.hooks import before_evaluation
from src.runs.parts import (
    RunParts,
    build_run_parts,
    checked_retriever,
    role_sampler,
    unseen_role,
)
from src.runs.record import log_artifacts, recorded_run
from src.tracking.run_logger import mlflow_loggers
from src.tracking.sweep import sweep_job
from src.utils.config import build
from src.utils.errors import ConfigError, MissingFileError

log = logging.getLogger(__name__)


def head_folders(settings: EvalSettings, heads: list[str]) -> dict[str, Path | None]:
    """Head name -> folder to load (None: the base model). A head named in
    `eval.policy_overrides` (and not in `eval.adapters`) is the base model. A head whose
    folder is missing is skipped with a warning where the folder is the default one (an
    interpolation, e.g. the pipeline's stage folder, not trained yet) and is an error where
    a path was given (`eval.adapters.grpo=RUN/model`): a head the user names must be scored."""
    adapters, overrides = settings.adapters, settings.policy_overrides
    chosen: dict[str, Path | None] = {}
    for head in heads:
        if head == "base" or (head in overrides and head not in adapters):
            chosen[head] = None
            continue
        if head not in adapters:
            raise ConfigError(
                f"eval.heads names {head!r} but eval.adapters has no such entry; "
                f"add eval.adapters.{head}=FOLDER (known: {sorted(adapters)}), or "
                f"eval.policy_overrides.{head} for the base model with other policy settings"
            )
        folder = Path(str(adapters[head]))
        if not folder.is_dir():
            if head not in settings.default_adapters:
                raise MissingFileError(
                    f"eval.adapters.{head}: no saved model at {folder}; {_saved_models(folder)}"
                )
            log.warning("Skipping head %s: no saved model at %s (not trained yet)", head, folder)
            continue
        chosen[head] = folder
    if not chosen:
        raise MissingFileError(
            f"none of the heads {heads} has a saved model; train them first "
            "(python -m src.pipeline) or set eval.adapters.<head>=FOLDER"
        )
    return chosen


def _saved_models(folder: Path) -> str:
    """What exists near a missing model folder: the saved models (folders with a config or an
    adapter config) in its nearest existing parent, for the error line."""
    parent = folder.parent
    while not parent.is_dir() and parent != parent.parent:
        parent = parent.parent
    found = sorted(
        str(path.parent)
        for name in ("config.json", "adapter_config.json")
        for path in parent.glob(f"*/{name}")
    )
    if not found:
        where = parent.resolve()
        return f"nothing is saved in {where}; give the folder of a run's model (RUN_FOLDER/model)"
    return f"saved models in {parent}: {', '.join(found[:5])}"


def load_head(model_cfg: DictConfig, folder: Path | None) -> PolicyNetwork:
    """The base model (folder None), or the saved adapter or full model in `folder`."""
    if folder is None:
        return build(model_cfg, lora=None, adapter_path=None)
    return build(model_cfg, **saved_model_settings(folder))


def evaluate(
    cfg: DictConfig,
    heads: list[str] | None = None,
    output_dir: str | Path | None = None,
    tags: dict[str, str] | None = None,
) -> dict[str, dict[str, float]]:
    """Score each head on the configured split; return {head: {metric: mean}}."""
    parts = build_run_parts(cfg)  # bad data fails here, before any model loads
    require_trained_stages(cfg)  # e.g. the char generator and judge: src.eval trains none
    settings, datamodule, loggers = parts.evaluation, parts.datamodule, parts.loggers
    rows = datamodule.split_rows(settings.split)
    rows = rows[: settings.max_rows] if settings.max_rows else rows
    if settings.oracle:  # a searcher's searches read the gold passage: reading alone
        rows = [{**row, "oracle": True} for row in rows]
    heads = list(heads or settings.heads)
    folders = head_folders(settings, heads)
    extract = settings.extractor()
    if not (output_dir or settings.output_dir):
        raise ConfigError("eval.output_dir is null: give eval.output_dir=FOLDER for the results")
    output_dir = Path(output_dir or str(settings.output_dir))
    output_dir.mkdir(parents=True, exist_ok=True)
    results_path, summary_path = output_dir / "eval_results.jsonl", output_dir / "eval_summary.json"
    summaries: dict[str, dict[str, float]] = {}
    # head -> each sampled row's pass@1, for room closed's margin
    rates: dict[str, list[float]] = {}
    run_tags = {"stage": "eval", "heads": ",".join(folders), **(tags or {})}
    with recorded_run(loggers, cfg, run_tags, datamodule.report), results_path.open("w") as results:
        # e.g. the last adversarial round's judge, as GRPO's
        parts = before_evaluation(parts.before_grpo, cfg, parts)
        for head, folder in folders.items():
            log.info(
                "Scoring head %s (%s) on %d %s rows",
                head,
                folder or "base",
                len(rows),
                settings.split,
            )
            lm = load_head(cfg.model, folder)
            overrides = settings.policy_overrides.get(head) or {}
            role, sampler = head_role(cfg, parts, overrides)
            role.prepare(lm, rows)
            scorer = GreedyScorer(sampler, role, parts.reward)
            records, summaries[head] = score_head(
                head, lm, scorer, rows, settings.batch_size, extract
            )
            if parts.room.in_eval:  # k samples a row: pass@1, maj@k, pass@k
                room, rates[head] = sampled_room(parts.room, lm, scorer, rows, extract)
                summaries[head].update(room)
            del lm
            results.writelines(jsonl_line(record) for record in records)
            results.flush()  # head by head: a later failure keeps these
            log_head(loggers, head, summaries[head])
        for head, closed in room_closed_against_base(summaries, rates).items():
            summaries[head].update(closed)
            log_head(loggers, head, closed)
        summary_path.write_text(json.dumps(summaries, indent=2))
        log_artifacts(loggers, results_path, summary_path)
    skipped = [head for head in heads if head not in folders]
    note = f"\nskipped, not trained yet: {', '.join(skipped)}" if skipped else ""
    log.info("Evaluation summary:\n%s%s", summary_table(summaries), note)
    return summaries


SHOWN_ROOM = (  # sampled figures a summary keeps
    "pass_at_1",
    "pass_at_1_margin",
    "maj_at_k",
    "pass_at_k",
    "room",
    "room_margin",
    "well_formed",
    "right_among_well_formed",
)


def sampled_room(
    settings: RoomSettings,
    lm: PolicyNetwork,
    scorer: GreedyScorer,
    rows: list[dict[str, Any]],
    extract: Any,
) -> tuple[dict[str, float], list[float]]:
    """`room.k` samples of each row (at most `room.eval_rows`) by the head: `room/<figure>`
    for the figures of SHOWN_ROOM it has (docs/room.md), and each row's pass@1."""
    reading = RoomReading.of(scorer.reward, settings.success, settings.form, extract)
    rows = rows[: settings.eval_rows] if settings.eval_rows else rows
    parts = (scorer.sampler, scorer.role, scorer.reward)
    split = sample_split(lm, parts, rows, settings.k, settings.batch_size, reading, settings.seed)
    figures = {f"room/{name}": split.figures[name] for name in SHOWN_ROOM if name in split.figures}
    return figures, prompt_pass_at_1(split.groups)


def room_closed_against_base(
    summaries: dict[str, dict[str, float]], rates: dict[str, list[float]]
) -> dict[str, dict[str, float]]:
    """Each head's `room/room_closed`: its sampled pass@1 less the base head's, over the base
    head's room, and its margin from the same rows' changes (`rates`: each head's per-row
    pass@1); {} where the base head was not scored or not sampled."""
    base = summaries.get("base", {})
    if "room/room" not in base:
        return {}
    closed = {}
    for head, summary in summaries.items():
        if head == "base" or "room/pass_at_1" not in summary:
            continue
        room = base["room/room"]
        closed[head] = {
            "room/room_closed": room_closed(summary["room/pass_at_1"], base["room/pass_at_1"], room)
        }
        if head in rates and "base" in rates:
            margin = room_closed_margin(rates[head], rates["base"], room)
            closed[head]["room/room_closed_margin"] = margin
    return closed


def log_head(loggers: list[Any], head: str, metrics: dict[str, float]) -> None:
    """`eval/<head>/<name>` at step 0 in every MLflow logger."""
    for logger in mlflow_loggers(loggers):
        logger.log_metrics({f"eval/{head}/{k}": v for k, v in metrics.items()}, 0)


def head_role(cfg: DictConfig, parts: RunParts, overrides: dict[str, Any]) -> tuple[Role, Sampler]:
    """The role and sampler a head is scored with: the run's, or the policy with the head's
    `overrides`; on `eval.split=unseen`, searching that split's own textbook."""
    if parts.evaluation.split == "unseen":
        return unseen_role(cfg, parts.datamodule, **overrides) if overrides else parts.unseen
    if not overrides:
        return parts.policy, parts.sampler
    role = build(cfg.policy, **checked_retriever(cfg), **overrides)
    if isinstance(role, SearchingRole):  # its own searches and tags
        return role, role_sampler(role, build(cfg.rollout))
    return role, parts.sampler


def summary_table(summaries: dict[str, dict[str, float]]) -> str:
    """The summaries as an aligned text table, one row per head, every column as wide as its
    whole name (a metric a head lacks shows as nan)."""
    names = list(dict.fromkeys(name for summary in summaries.values() for name in summary))
    width = max(len("head"), *(len(head) for head in summaries))
    columns = [max(len(name), 9) for name in names]  # 9: -1234.567
    titles = (name.rjust(column) for name, column in zip(names, columns, strict=True))
    lines = ["  ".join(["head".ljust(width), *titles])]
    for head, summary in summaries.items():
        values = [summary.get(name, float("nan")) for name in names]
        cells = (f"{value:{column}.3f}" for value, column in zip(values, columns, strict=True))
        lines.append("  ".join([head.ljust(width), *cells]))
    return "\n".join(lines)


@hydra.main(version_base="1.3", config_path="../conf", config_name="train")
def main(cfg: DictConfig) -> Any:
    """Command-line entry: `python -m src.eval task=medmcqa eval.heads=[base,sft]`; in a
    multirun, a failing job is recorded and the sweep goes on."""
    with sweep_job(cfg):
        return evaluate(cfg)
    return None


if __name__ == "__main__":
    run_cli(main)
