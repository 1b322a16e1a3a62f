"""What `record_run` and `recorded_run` leave in MLflow: values naming the run's own folder as
tags rather than params, and a run stopped by Ctrl-C KILLED rather than FAILED."""

from __future__ import annotations

import signal
from collections.abc import Iterator
from pathlib import Path

import lightning as L
import mlflow
import pytest
import torch
from lightning.pytorch.callbacks import Callback

from src.runs.preemption import Interrupted
from src.runs.record import record_run, recorded_run, split_params
from src.utils.config import build

# Keys whose default values lie inside the run folder.
FOLDER_KEYS = {
    "paths.run_dir",
    "callbacks.checkpoint.dirpath",
    "save_model",
    "logger.mlflow.fallback_dir",
    "trainer.default_root_dir",
    "eval.output_dir",
}


def fetch(logger) -> mlflow.entities.Run:
    return mlflow.MlflowClient(tracking_uri=logger._tracking_uri).get_run(logger.run_id)


def test_values_naming_the_run_folder_are_tags_not_params(make_cfg, tmp_path):
    cfg = make_cfg()
    logger = build(cfg.logger.mlflow)
    record_run([logger], cfg)
    logger.end_run()
    run = fetch(logger)

    run_dir = str(tmp_path / "run")
    assert [key for key, value in run.data.params.items() if run_dir in value] == []
    assert set(run.data.tags) >= FOLDER_KEYS
    assert FOLDER_KEYS.isdisjoint(run.data.params)
    assert run.data.tags["save_model"] == f"{run_dir}/model"
    assert run.data.tags["callbacks.checkpoint.dirpath"] == f"{run_dir}/checkpoints"
    # Folders shared by runs stay params; so does everything else.
    assert run.data.params["paths.output_root"] == str(tmp_path / "outputs")
    assert run.data.params["algo.group_size"] == "4"


def test_a_folder_counts_as_a_whole_path_and_a_continued_runs_checkpoints_too():
    resolved = {
        "paths": {"run_dir": "/out/run", "output_root": "/out"},
        "callbacks": {"checkpoint": {"dirpath": "/out/first/checkpoints"}},  # a continued run
        "ckpt_path": "/out/first/checkpoints/last.ckpt",
        "uri": "sqlite:////out/run/mlflow.db",
        "sibling": "/out/run2/data.json",
        "count": 3,
        "paths_list": ["/out/run/a"],
    }
    params, tags = split_params(resolved)
    assert set(tags) == {"paths.run_dir", "callbacks.checkpoint.dirpath", "ckpt_path", "uri"}
    assert set(params) == {"paths.output_root", "sibling", "count", "paths_list"}

    # Checkpoints in a folder that holds the run folder: that folder is not the run's own.
    resolved["callbacks"]["checkpoint"]["dirpath"] = "/out"
    params, tags = split_params(resolved)
    assert set(tags) == {"paths.run_dir", "uri"}


class TinyModule(L.LightningModule):
    """A one-weight module to run Lightning's validation loop on."""

    def __init__(self) -> None:
        super().__init__()
        self.weight = torch.nn.Parameter(torch.zeros(1))

    def validation_step(self, batch: list[torch.Tensor], batch_index: int) -> None:
        self.log("loss", (self.weight * batch[0]).sum())

    def val_dataloader(self) -> torch.utils.data.DataLoader:
        return torch.utils.data.DataLoader(torch.utils.data.TensorDataset(torch.ones(2, 1)))


class CtrlC(Callback):
    """Raises what Ctrl-C raises, as validation starts."""

    def on_validation_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        raise KeyboardInterrupt


def ctrl_c_in_python() -> None:
    raise KeyboardInterrupt


def ctrl_c_in_lightning() -> None:
    """Lightning answers a KeyboardInterrupt with `sys.exit(1)` (and ignores SIGINT after)."""
    trainer = L.Trainer(
        accelerator="cpu", logger=False, enable_progress_bar=False, enable_model_summary=False,
        enable_checkpointing=False, callbacks=[CtrlC()],
    )  # fmt: skip
    trainer.validate(TinyModule(), verbose=False)


@pytest.fixture
def sigint_handler() -> Iterator[None]:
    """Give SIGINT back its handler after a test in which Lightning set it to be ignored."""
    handler = signal.getsignal(signal.SIGINT)
    yield
    signal.signal(signal.SIGINT, handler)


@pytest.mark.parametrize(
    ("body", "checkpoint"), [(ctrl_c_in_python, False), (ctrl_c_in_lightning, True)]
)
def test_ctrl_c_outside_training_marks_the_run_killed(
    body, checkpoint, make_cfg, tmp_path, sigint_handler
):
    cfg = make_cfg()
    path = Path(cfg.callbacks.checkpoint.dirpath) / "last.ckpt"
    if checkpoint:  # an earlier periodic checkpoint of the run
        path.parent.mkdir(parents=True)
        path.write_bytes(b"")
    logger = build(cfg.logger.mlflow)
    with pytest.raises(Interrupted) as stopped, recorded_run([logger], cfg):
        body()

    assert stopped.value.code == 128 + signal.SIGINT
    run = fetch(logger)
    assert run.info.status == "KILLED"
    found = (
        f"the newest checkpoint is {path}; continue with ckpt_path={path}"
        if checkpoint
        else "the run has no checkpoint to continue from"
    )
    assert run.data.tags["error"] == (
        f"Interrupted: Ctrl-C (SIGINT): stopped at once; no new checkpoint was written; {found}"
    )


def test_any_other_error_still_marks_the_run_failed(make_cfg):
    cfg = make_cfg()
    logger = build(cfg.logger.mlflow)
    with pytest.raises(SystemExit), recorded_run([logger], cfg):
        raise SystemExit(1)  # a plain exit, not from a Ctrl-C
    assert fetch(logger).info.status == "FAILED"
