"""A sweep's values are checked before its first job: a value its setting refuses stops the
sweep in one line with status 1 and no job run; config groups, values that only fail together
and search spaces are left to each job."""

from __future__ import annotations

import pytest
from omegaconf import open_dict

from src.runs.sweep_check import check_constant_values, check_swept_values
from src.utils.compose import compose_config
from src.utils.errors import ConfigError
from tests.runs.test_user_errors import error_line, train_command


def sweep_config(*overrides: str):
    """The training config with `overrides` as the sweep's command line: the first value of
    each swept key applied, as Hydra composes a multirun's config."""
    applied = [
        line.split(",")[0] if "," in line and "[" not in line else line for line in overrides
    ]
    cfg = compose_config([line for line in applied if "=" in line and "(" not in line])
    with open_dict(cfg):
        cfg.hydra.overrides.task = list(overrides)
    return cfg


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("algo.kl_beta=0.0,abc", "algo.kl_beta must be a number >= 0, got 'abc'"),
        ("algo.group_size=4,1", "algo.group_size must be a whole number >= 2"),
        ("algo.optimizer.lr=1e-5,-1", "algo.optimizer.lr must be a number > 0, got -1"),
        ("rollout.temperature=1.0,-0.5", "rollout.temperature"),
    ],
)
def test_a_refused_value_names_the_key_the_value_and_the_sweep(line, message):
    with pytest.raises(ConfigError, match=message) as raised:
        check_swept_values(sweep_config(line))
    assert f"(swept by {line}); no job of the sweep was started" in str(raised.value)


@pytest.mark.parametrize(
    "line",
    [
        "algo.kl_beta=0.0,0.04",  # every value allowed
        "algo=grpo,dapo",  # a config group: each job composes and checks its own
        "algo.kl_beta=interval(0.0,0.1)",  # a search space: nothing to list
        "+new_key=1,2",  # a key the config does not have
    ],
)
def test_what_the_check_cannot_judge_is_left_to_each_job(line):
    check_swept_values(sweep_config(line))


@pytest.mark.parametrize(
    ("lines", "message"),
    [
        (["seed=1,2", "algo.group_size=1"], "algo.group_size must be a whole number >= 2"),
        (["seed=1,2", "data.batch_size=abc"], "data.batch_size must be a whole number >= 1"),
        (["seed=1,2", "algo.advantage_estimator=rloo"], "algo.scale_rewards=group scales"),
    ],
)
def test_a_refused_value_every_job_shares_stops_the_sweep(lines, message):
    """A value no job could run with is refused once, before the first job, not job by job
    (each a traceback in the log); a sweep whose shared values are right passes."""
    with pytest.raises(ConfigError, match=message) as raised:
        check_constant_values(sweep_config(*lines))
    assert str(raised.value).endswith("(in every job); no job of the sweep was started")
    check_constant_values(sweep_config("seed=1,2", "algo.group_size=4"))


def test_the_command_stops_before_any_job(tmp_path):
    result = train_command(tmp_path, "-m", "algo.kl_beta=0.0,abc", "dry_run=true")
    line = error_line(result)
    assert line == (
        "error: algo.kl_beta must be a number >= 0, got 'abc' (swept by algo.kl_beta=0.0,abc); "
        "no job of the sweep was started"
    )
    assert not (tmp_path / "multiruns").exists() and not (tmp_path / "mlflow.db").exists()


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("hydra.sweeper.n_trials=0", "hydra.sweeper.n_trials must be a whole number >= 1, got 0"),
        ("hydra.sweeper.n_jobs=0", "hydra.sweeper.n_jobs must be a whole number >= 1, got 0"),
    ],
)
def test_a_search_that_cannot_run_stops_before_any_job(tmp_path, line, message):
    result = train_command(tmp_path, "hparams_search=optuna", line, "model=tiny")
    assert error_line(result) == f"error: {message}; no job of the sweep was started"
    assert not (tmp_path / "mlflow.db").exists()


def test_a_sweep_with_a_failed_job_exits_with_status_1_after_the_others(capsys):
    from src.runs.cli import exit_if_jobs_failed
    from src.tracking.sweep import forget_failed_jobs, note_failed

    forget_failed_jobs()
    assert exit_if_jobs_failed("result") == "result"
    note_failed(2, "DataFileError: bad.jsonl:2: malformed JSON line\nmore")
    note_failed(0, "ConfigError: algo.kl_beta must be a number >= 0, got 'abc'")
    with pytest.raises(SystemExit) as stopped:
        exit_if_jobs_failed(None)
    forget_failed_jobs()
    assert stopped.value.code == 1
    assert capsys.readouterr().err.strip() == (
        "error: 2 job(s) of the sweep failed (job 0: ConfigError: algo.kl_beta must be a number "
        ">= 0, got 'abc'; job 2: DataFileError: bad.jsonl:2: malformed JSON line); the others "
        "finished"
    )
