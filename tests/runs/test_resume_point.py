"""Which checkpoint `ckpt_path` names, loading it safely, the resumable data order, and an
MLflow run reopened without writing a step twice."""

from __future__ import annotations

import copy
import json
import os
import pickle
from pathlib import Path

import mlflow
import pytest
import torch
from lightning.pytorch.callbacks import ModelCheckpoint
from torch.utils.data import RandomSampler

from src.data.datamodule import StepSampler
from src.runs.record import with_derived
from src.runs.resume import (
    ResumeError,
    find_checkpoint,
    read_checkpoint,
    resume_point,
    resumed_settings,
    run_callbacks,
)
from src.tracking.run_logger import MLflowRunLogger


def checkpoint(folder: Path, age_s: float = 0.0) -> Path:
    path = folder / "checkpoints" / "last.ckpt"
    path.parent.mkdir(parents=True)
    torch.save({"global_step": 3}, path)
    stamp = path.stat().st_mtime - age_s
    os.utime(path, (stamp, stamp))
    return path


def test_last_is_the_newest_checkpoint_of_the_other_runs(tmp_path):
    older = checkpoint(tmp_path / "a", age_s=60)
    newer = checkpoint(tmp_path / "b")
    (tmp_path / "c").mkdir()  # a run that stopped before its first checkpoint
    assert find_checkpoint("last", tmp_path) == newer
    assert find_checkpoint("last", tmp_path, current_run=tmp_path / "b") == older


def test_a_run_folder_or_checkpoints_folder_or_file_names_its_last_checkpoint(tmp_path):
    path = checkpoint(tmp_path / "run")
    for spec in (tmp_path / "run", tmp_path / "run" / "checkpoints", path):
        assert find_checkpoint(str(spec), tmp_path) == path
    with pytest.raises(ResumeError, match="no checkpoint file or run folder there"):
        find_checkpoint(str(tmp_path / "nothing"), tmp_path)
    with pytest.raises(ResumeError, match="no run folder in .* holds checkpoints/last.ckpt"):
        find_checkpoint("last", tmp_path / "run")
    (tmp_path / "run" / "model").mkdir()  # the saved policy, named instead of its run
    with pytest.raises(ResumeError) as named:
        find_checkpoint(str(tmp_path / "run" / "model"), tmp_path)
    assert str(named.value) == (
        f"ckpt_path={tmp_path / 'run' / 'model'}: that folder holds no checkpoint; its run's "
        f"checkpoint is {path}: pass ckpt_path={tmp_path / 'run'} (the run folder)"
    )


class Planted:
    """Unpickling this would create a file: what a hostile checkpoint could do."""

    def __init__(self, path: str) -> None:
        self.path = path

    def __reduce__(self):
        return (Path.touch, (Path(self.path),))


def test_checkpoints_are_read_without_running_code(tmp_path):
    marker = tmp_path / "code-ran"
    path = tmp_path / "hostile.ckpt"
    torch.save({"global_step": 1, "payload": Planted(str(marker))}, path, pickle_module=pickle)
    with pytest.raises(ResumeError, match="cannot be read as a checkpoint"):
        read_checkpoint(path)
    assert not marker.exists()


def test_the_data_order_resumes_at_any_batch_of_any_pass():
    sampler = StepSampler(num_rows=7, batch_size=4, num_batches=5, seed=3)
    batches = list(sampler)
    assert [len(batch) for batch in batches] == [4] * 5
    first = [row for batch in batches for row in batch]
    # Pass 0 is what torch's RandomSampler draws with the same seed (earlier runs unchanged).
    torch_order = RandomSampler(
        range(7), num_samples=20, generator=torch.Generator().manual_seed(3)
    )
    assert first == list(torch_order)
    sampler.set_epoch(1)
    second = [row for batch in sampler for row in batch]
    assert second != first and sorted(second[:7]) == list(range(7))
    sampler.resume_at(1, 2)
    assert [row for batch in sampler for row in batch] == second[8:]
    assert [
        row for batch in sampler for row in batch
    ] == second  # only the resumed pass starts late


def test_a_reopened_run_keeps_its_first_values(tmp_path):
    uri = f"sqlite:///{tmp_path}/mlflow.db"
    first = MLflowRunLogger(experiment_name="e", tracking_uri=uri)
    first.log_hyperparams({"lr": 0.1, "seed": 1})
    for step in range(1, 6):
        first.log_metrics({"loss": float(step)}, step=step)
    first.log_metrics({"eval/accuracy": 0.5}, step=4)
    first.finalize("KILLED")
    first.experiment.set_tag(first.run_id, "error", "Preempted: SIGTERM received")

    again = MLflowRunLogger(experiment_name="e", tracking_uri=uri, run_id=first.run_id)
    again.reopen(step=3, checkpoint="last.ckpt")
    client = mlflow.MlflowClient(uri)
    assert client.get_run(first.run_id).info.status == "RUNNING"
    for step in range(4, 8):  # steps 4 and 5 are replayed
        again.log_metrics({"loss": 10.0 * step, "eval/accuracy": 0.9}, step=step)
    again.log_hyperparams({"lr": 0.2, "seed": 1, "new": "x"})
    again.log_hyperparams({"seed": 2})  # a second call adds to the list of changes
    again.end_run()

    run = client.get_run(first.run_id)
    loss = [(m.step, m.value) for m in client.get_metric_history(first.run_id, "loss")]
    assert sorted(loss) == [(1, 1.0), (2, 2.0), (3, 3.0), (4, 4.0), (5, 5.0), (6, 60.0), (7, 70.0)]
    accuracy = sorted(m.step for m in client.get_metric_history(first.run_id, "eval/accuracy"))
    assert accuracy == [4, 5, 6, 7]
    assert run.data.params == {"lr": "0.1", "seed": "1", "new": "x"}
    assert run.info.status == "FINISHED"
    assert run.data.tags["resumes"] == "1" and "error" not in run.data.tags
    changed = json.loads(
        Path(
            client.download_artifacts(first.run_id, "resumes/1_params.json", str(tmp_path))
        ).read_text()
    )
    assert changed == {
        "changed_params": {
            "lr": {"before": "0.1", "now": "0.2"},
            "seed": {"before": "1", "now": "2"},
        }
    }


def test_a_continuation_writes_its_checkpoints_beside_the_one_it_continues_and_records_it(
    make_cfg, tmp_path
):
    """The continued run's checkpoint callback writes beside the checkpoint it started from,
    so `ckpt_path=last` finds the newest again after a second stop; the record says so; the
    config keeps its own folder."""
    path = checkpoint(tmp_path / "first")
    cfg = make_cfg(f"ckpt_path={tmp_path / 'first'}")
    given = copy.deepcopy(cfg)
    point = resume_point(cfg)
    assert point.checkpoint == path and point.step == 3
    (saver,) = [c for c in run_callbacks(cfg, point) if isinstance(c, ModelCheckpoint)]
    assert Path(saver.dirpath) == path.parent
    assert resumed_settings(cfg, point) == {"callbacks.checkpoint.dirpath": str(path.parent)}
    assert resumed_settings(cfg, None) == {}
    assert cfg == given  # read, not written
    (fresh,) = [c for c in run_callbacks(cfg, None) if isinstance(c, ModelCheckpoint)]
    assert Path(fresh.dirpath) == Path(cfg.callbacks.checkpoint.dirpath)


def test_the_record_shows_what_the_run_derived_in_place_of_the_configs_null():
    resolved = {"trainer": {"max_steps": None, "devices": 1}, "seed": 1}
    derived = {"trainer.max_steps": 44, "data.num_batches": 22}
    assert with_derived(resolved, derived) == {
        "trainer": {"max_steps": 44, "devices": 1},
        "seed": 1,
        "data": {"num_batches": 22},
    }
    assert resolved["trainer"]["max_steps"] is None  # the config's own values are left
