"""Hydra entry point: `python -m src.pipeline task=medmcqa [pipeline.stage=NAME]` runs a recipe.

The stages, in order (`pipeline.stage=all`, the default, runs them all):
- prep: clean the data and freeze its train/validation split under `pipeline.dir/data/`;
- baseline: score the base model on the validation split (`pipeline.dir/baseline/`);
- sft: supervised LoRA training on the train split (`pipeline.dir/sft/`);
- grpo: GRPO from the SFT adapter when there is one (`pipeline.dir/grpo/`);
- eval: score base, SFT and GRPO heads (`pipeline.dir/eval/eval_results.jsonl`).
Every stage after prep reads the prepared split, so all of them see the same questions, and
each stage is one MLflow run tagged `stage` and `pipeline`.
"""

from __future__ import annotations

import json
import logging
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import hydra
from omegaconf import DictConfig, OmegaConf, open_dict

from src.data.files import jsonl_line
from src.eval import evaluate
from src.model.saved import saved_model_settings
from src.runs.cli import run_cli
from src.runs.parts import build_run_parts, warm_started
from src.runs.record import recorded_run
from src.runs.schema import PIPELINE_STAGES, RUN_SETTINGS
from src.tracking.sweep import sweep_job
from src.train import train
from src.utils.errors import MissingFileError
from src.utils.setting import Declared

log = logging.getLogger(__name__)
STAGES = PIPELINE_STAGES


@dataclass(frozen=True)
class PipelineSettings(Declared):
    """`pipeline.*` (conf/pipeline/default.yaml), declared in `runs/schema.py`: which stage
    runs (`all`: every one in order) and the folder where the stages meet."""

    SECTION = "pipeline"
    TABLE = RUN_SETTINGS

    stage: str = "all"
    dir: str = "outputs/pipeline"

    @property
    def folder(self) -> Path:
        return Path(self.dir)


def stage_tags(settings: PipelineSettings, stage: str) -> dict[str, str]:
    return {"stage": stage, "pipeline": str(settings.dir)}


def write_jsonl(path: Path, rows: list[dict[str, Any]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8") as handle:
        handle.writelines(jsonl_line(row) for row in rows)


def prep(cfg: DictConfig, settings: PipelineSettings) -> None:
    """Clean the configured data and write the split every later stage uses."""
    parts = build_run_parts(cfg)
    datamodule, folder = parts.datamodule, settings.folder / "data"
    with recorded_run(parts.loggers, cfg, stage_tags(settings, "prep"), datamodule.report):
        write_jsonl(folder / "train.jsonl", datamodule.train_rows)
        write_jsonl(folder / "validation.jsonl", datamodule.val_rows)
        (folder / "prep_report.json").write_text(json.dumps(datamodule.report, indent=2))
    log.info("prep: %s -> %s", datamodule.report, folder)


def prepared(cfg: DictConfig, settings: PipelineSettings) -> DictConfig:
    """A copy of `cfg` whose data is the prepared split (already clean: no schema)."""
    folder = settings.folder / "data"
    train_path, val_path = folder / "train.jsonl", folder / "validation.jsonl"
    if not (train_path.is_file() and val_path.is_file()):
        raise MissingFileError(
            f"no prepared data in {folder}: run the prep stage first "
            f"(python -m src.pipeline task={cfg.task_name} pipeline.stage=prep)"
        )
    derived = OmegaConf.create(OmegaConf.to_container(cfg, resolve=True))
    with open_dict(derived):
        derived.data.path, derived.data.val_path = str(train_path), str(val_path)
        derived.data.schema = None
        derived.data.required_fields = ["question", "answer"]
        derived.data.max_val_rows = None  # prep applied the cap already
    return derived


def baseline(cfg: DictConfig, settings: PipelineSettings) -> None:
    """Score the base model before any training."""
    out = settings.folder / "baseline"
    evaluate(
        prepared(cfg, settings),
        heads=["base"],
        output_dir=out,
        tags=stage_tags(settings, "baseline"),
    )


def sft(cfg: DictConfig, settings: PipelineSettings) -> None:
    """Supervised training on the prepared train split; the adapter lands in `pipeline.dir/sft`."""
    derived = prepared(cfg, settings)
    with open_dict(derived):
        derived.sft.enabled = True
    parts = build_run_parts(derived)
    report = parts.datamodule.report
    with recorded_run(parts.loggers, derived, stage_tags(settings, "sft"), report):
        folder = warm_started(derived, parts)
    target = settings.folder / "sft"
    shutil.rmtree(target, ignore_errors=True)
    shutil.copytree(folder, target)
    log.info("sft: %s -> %s", folder, target)


def grpo(cfg: DictConfig, settings: PipelineSettings) -> None:
    """GRPO on the prepared train split, continuing the SFT adapter when the sft stage left one."""
    derived = prepared(cfg, settings)
    start = settings.folder / "sft"
    with open_dict(derived):
        derived.sft.enabled = False
        derived.save_model = str(settings.folder / "grpo")
    if start.is_dir():  # the next run's config, composed here before it is read
        with open_dict(derived):
            derived.model.update(saved_model_settings(start))
    else:
        log.warning("grpo: no SFT result at %s; starting from the base model", start)
    train(derived, tags=stage_tags(settings, "grpo"))


def final_eval(cfg: DictConfig, settings: PipelineSettings) -> None:
    """Score every configured head (base, SFT, GRPO) on the prepared validation split."""
    out = settings.folder / "eval"
    evaluate(prepared(cfg, settings), output_dir=out, tags=stage_tags(settings, "eval"))


RUNNERS: dict[str, Callable[[DictConfig, PipelineSettings], None]] = {
    "prep": prep,
    "baseline": baseline,
    "sft": sft,
    "grpo": grpo,
    "eval": final_eval,
}


def run_pipeline(cfg: DictConfig) -> list[str]:
    """Run `pipeline.stage` (or all stages in order); return the stages run."""
    settings = PipelineSettings.of_section(cfg.get("pipeline"), "src.pipeline")
    stages = list(STAGES) if settings.stage == "all" else [settings.stage]
    for name in stages:
        log.info("=== stage %s ===", name)
        RUNNERS[name](cfg, settings)
    return stages


@hydra.main(version_base="1.3", config_path="../conf", config_name="train")
def main(cfg: DictConfig) -> Any:
    """Command-line entry: `python -m src.pipeline task=medmcqa`; in a multirun, a failing
    job is recorded and the sweep goes on."""
    with sweep_job(cfg):
        run_pipeline(cfg)


if __name__ == "__main__":
    run_cli(main)
