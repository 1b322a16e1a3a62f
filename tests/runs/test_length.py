"""Presets and `epochs=N`: a run length in passes over the data becomes optimizer steps once the
training rows are known, held in the run's `RunLength` (the config keeps what was given);
`trainer.max_steps=N` on the command line wins."""

from __future__ import annotations

import copy
import math

import pytest
import torch
from omegaconf import DictConfig

from src.data.datamodule import PromptDataModule
from src.runs.length import RunLength, run_length
from src.runs.settings import check_settings
from src.utils.config import build
from src.utils.errors import ConfigError

MATH_TRAIN_ROWS = 270 - 40 - 30  # CHAMP less the unseen Combinatorics and the held-out problems


def settled(make_cfg, *overrides: str) -> tuple[DictConfig, PromptDataModule, RunLength]:
    """The config, the data module and the run length `build_run_parts` finds."""
    cfg = make_cfg("task=math", *overrides, tiny=False)
    algo = check_settings(cfg)
    datamodule = build(cfg.data)
    datamodule.prepare_rows()
    given = copy.deepcopy(cfg)
    length = run_length(cfg, datamodule, algo)  # as build_run_parts does, without opening MLflow
    assert cfg == given  # the config is read, not written
    return cfg, datamodule, length


def horizon(cfg: DictConfig, length: RunLength) -> int:
    """The steps the run's learning-rate schedule decays over."""
    return length.schedule(cfg.algo).keywords["num_training_steps"]


@pytest.mark.parametrize(
    ("preset", "epochs", "group_size", "batch_size"),
    [
        ("fast_test", 1, 2, 1),
        ("full_training", 5, 8, 4),
        ("from_sft", 3, 4, 2),
        ("low_memory", 3, 2, 1),
    ],
)
def test_a_preset_sets_the_size_and_epochs_become_steps(
    make_cfg, preset, epochs, group_size, batch_size
):
    cfg, data, length = settled(make_cfg, f"preset={preset}")
    steps = math.ceil(epochs * MATH_TRAIN_ROWS / batch_size)
    assert (cfg.epochs, data.settings.batch_size) == (epochs, batch_size)
    assert length.max_steps == steps and data.num_batches == steps == length.rollouts
    assert horizon(cfg, length) == steps  # the schedule follows
    assert length.trainer_settings() == {"max_steps": steps, "val_check_interval": min(60, steps)}
    assert cfg.algo.group_size == group_size


def test_the_math_task_without_a_preset_is_the_default_preset(make_cfg):
    plain = make_cfg("task=math", tiny=False)
    named = make_cfg("task=math", "preset=default", tiny=False)
    assert plain == named and plain.epochs is None


def test_the_default_preset_is_a_run_of_fixed_steps_at_the_tasks_learning_rate(make_cfg):
    """preset=default: the 30-minute size, 22 steps whatever the rows, at the task's lr."""
    cfg, data, length = settled(make_cfg, "preset=default")
    assert length.max_steps == 22 and data.num_batches == 22
    assert horizon(cfg, length) == 22
    assert (cfg.algo.group_size, data.settings.batch_size) == (4, 2)
    assert cfg.algo.optimizer.lr == 5e-4


def test_steps_on_the_command_line_win_over_a_presets_epochs(make_cfg):
    cfg, data, length = settled(make_cfg, "preset=full_training", "trainer.max_steps=7")
    assert length.max_steps == 7 and data.num_batches == 7


def test_several_updates_per_rollout_multiply_the_steps(make_cfg):
    cfg, data, length = settled(make_cfg, "preset=fast_test", "algo.num_iterations=2")
    assert data.num_batches == MATH_TRAIN_ROWS and length.max_steps == 2 * MATH_TRAIN_ROWS


def test_epochs_apply_to_any_task(make_cfg):
    cfg, data, length = settled(
        make_cfg, "task=arithmetic", "epochs=0.5", "trainer.max_steps=null", "data.batch_size=64"
    )
    assert length.max_steps == math.ceil(0.5 * len(data.train_rows) / 64)


def test_a_warmup_ratio_is_a_share_of_the_steps_epochs_give(make_cfg):
    """The rewriter's warm-up (5 % of its steps) follows a run length epochs=N sets."""

    cfg, data, length = settled(
        make_cfg, "task=medqa_rewriter_smollm2", "trainer.max_steps=null", "epochs=2"
    )
    assert cfg.algo.scheduler.warmup_ratio == 0.05
    optimizer = torch.optim.SGD([torch.nn.Parameter(torch.ones(1))], lr=1.0)
    schedule = length.schedule(cfg.algo)(optimizer=optimizer)
    warmup = math.ceil(0.05 * length.max_steps)
    rates = []
    for _ in range(warmup + 1):
        rates.append(optimizer.param_groups[0]["lr"])
        optimizer.step()
        schedule.step()
    assert rates[0] == 0.0 and rates[warmup] == pytest.approx(1.0)  # warmed up, then decays
    assert rates[warmup - 1] < 1.0


def test_from_sft_runs_the_warm_start_only_without_an_adapter(make_cfg, tmp_path):
    warm = make_cfg("task=math", "preset=from_sft", tiny=False)
    assert warm.sft.enabled and warm.model.adapter_path is None
    assert warm.algo.optimizer.lr == 5e-6
    given = make_cfg("task=math", "preset=from_sft", f"sft_adapter={tmp_path}", tiny=False)
    assert not given.sft.enabled and given.model.adapter_path == str(tmp_path)


def test_low_memory_loads_4_bit_weights_and_needs_lora(make_cfg):
    cfg = make_cfg("task=math", "preset=low_memory", tiny=False)
    assert cfg.model.load_in_4bit and cfg.model.gradient_checkpointing and cfg.model.lora.r
    check_settings(cfg)
    with pytest.raises(ConfigError, match="4-bit weights cannot be trained"):
        check_settings(make_cfg("task=math", "preset=low_memory", "model=tiny", tiny=False))


def length_of(cfg: DictConfig) -> RunLength:
    """The run length of a config of fixed steps (no data needed)."""
    return run_length(cfg, None, check_settings(cfg))


@pytest.mark.slow
def test_evaluation_follows_optimizer_steps_with_several_updates_per_rollout(make_cfg):
    """trainer.val_check_interval counts optimizer steps, and the last step is evaluated,
    whatever algo.num_iterations."""
    from src.train import train
    from tests.helpers.mlflow_runs import history, only_run

    cfg = make_cfg(
        "algo.num_iterations=2",
        "trainer.max_steps=6",
        "trainer.val_check_interval=4",
        "callbacks.checkpoint.every_n_train_steps=2",
    )
    assert length_of(cfg).evaluate_every == 2  # rollouts, as Lightning counts
    train(cfg)
    assert sorted(history(cfg, only_run(cfg), "eval/accuracy")) == [0, 4, 6]


def test_a_null_evaluation_interval_evaluates_at_step_0_and_the_end_only(make_cfg):
    """`trainer.val_check_interval=null` is allowed by its declaration: the interval is the
    whole run (in rollouts), not a traceback."""
    from src.train import train
    from tests.helpers.mlflow_runs import history, only_run

    cfg = make_cfg("trainer.max_steps=3", "trainer.val_check_interval=null")
    assert length_of(cfg).evaluate_every == 3
    two_updates = make_cfg("trainer.max_steps=4", "algo.num_iterations=2")
    two_updates.trainer.val_check_interval = None
    assert length_of(two_updates).evaluate_every == 2
    train(cfg)
    assert sorted(history(cfg, only_run(cfg), "eval/accuracy")) == [0, 3]


def test_a_run_of_epochs_records_its_steps_and_leaves_the_config_as_given(make_cfg):
    """Under epochs=N the trainer, the data and the record take the steps the rows give; the
    config keeps `trainer.max_steps: null`."""
    from src.train import train
    from tests.helpers.mlflow_runs import history, only_run

    probe = make_cfg("trainer.max_steps=null", "epochs=1")
    data = build(probe.data)
    data.prepare_rows()
    epochs = 1.5 * data.settings.batch_size / len(data.train_rows)  # 1.5 batches: 2 steps
    cfg = make_cfg("trainer.max_steps=null", f"epochs={epochs}", "trainer.val_check_interval=1")
    given = copy.deepcopy(cfg)
    train(cfg)
    assert cfg == given
    run = only_run(cfg)
    assert sorted(history(cfg, run, "eval/accuracy")) == [0, 1, 2]
    assert run.data.params["trainer.max_steps"] == "2"
    assert run.data.params["algo.scheduler.num_training_steps"] == "2"
