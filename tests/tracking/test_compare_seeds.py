"""`python -m src.compare` on hand-made sweeps in a store of their own: configurations are the
swept keys but the seed, the interval table and the probability of improvement are printed,
the plots written and logged to the sweep's parent run."""

from __future__ import annotations

from pathlib import Path

import mlflow
import pandas as pd
import pytest
from mlflow import MlflowClient

from src.compare import compare_sweep, main
from src.tracking.over_seeds import configuration_labels, final_scores
from src.tracking.sweep import Job, Sweep, job_tags


def make_sweep(
    uri: str,
    finals: dict[tuple[str, int], float],
    swept: tuple[str, ...],
    experiment_name: str = "arithmetic",
) -> str:
    """A sweep of `finals` ({(algo, seed): final eval/accuracy}) in experiment `experiment_name`:
    a parent run and one child a job, tagged as a real sweep tags them; each child's
    eval/accuracy rises linearly from 0 at step 0 to its final value at step 4."""
    client = MlflowClient(tracking_uri=uri)
    experiment = client.create_experiment(experiment_name)
    sweep_id = f"sweep-{experiment_name}"
    parent = client.create_run(experiment, tags={"sweep_id": sweep_id, "sweep_role": "parent"})
    sweep = Sweep(sweep_id, parent.info.run_id, swept)
    for number, ((algo, seed), final) in enumerate(finals.items()):
        values = {"algo": algo, "seed": str(seed)}
        job = Job(sweep, number, {key: values[key] for key in swept}, f"/d/{number}")
        run = client.create_run(experiment, tags=job_tags(job))
        for step in range(5):
            client.log_metric(run.info.run_id, "eval/accuracy", final * step / 4, step=step)
        client.set_terminated(run.info.run_id)
    client.set_terminated(parent.info.run_id)
    return parent.info.run_id


GRPO = {
    ("grpo", seed): value
    for seed, value in zip(range(1, 6), [0.5, 0.55, 0.6, 0.52, 0.58], strict=True)
}
DAPO = {
    ("dapo", seed): value
    for seed, value in zip(range(1, 6), [0.8, 0.85, 0.9, 0.82, 0.88], strict=True)
}


@pytest.fixture
def store(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'mlflow.db'}"


def test_the_seed_is_no_part_of_a_configuration() -> None:
    sweep = Sweep("s", "p", ("algo", "seed"))
    tags = job_tags(Job(sweep, 0, {"algo": "dapo", "seed": "3"}, "/d"))
    assert tags["sweep_config"] == "algo=dapo" and tags["sweep.seed"] == "3"
    only_seeds = job_tags(Job(Sweep("s", "p", ("seed",)), 0, {"seed": "3"}, "/d"))
    assert only_seeds["sweep_config"] == "all runs"
    runs = pd.DataFrame({"sweep.algo": ["grpo", "dapo", "grpo"], "sweep.seed": [1, 1, 2]})
    assert list(configuration_labels(runs)) == ["algo=grpo", "algo=dapo", "algo=grpo"]
    numeric = pd.DataFrame({"sweep.algo.kl_beta": [0.05, 0.1], "sweep.algo.group_size": [2.0, 4.0]})
    assert list(configuration_labels(numeric)) == [
        "algo.kl_beta=0.05 algo.group_size=2",
        "algo.kl_beta=0.1 algo.group_size=4",
    ]
    assert list(configuration_labels(runs[["sweep.seed"]])) == ["all runs"] * 3


def test_a_sweep_of_algorithms_and_seeds_is_compared_over_its_seeds(
    store: str, tmp_path: Path, capsys
) -> None:
    parent = make_sweep(store, GRPO | DAPO, ("algo", "seed"))
    output = tmp_path / "compared"
    argv = ["arithmetic", "--tracking-uri", store, "--output", str(output), "--steps-to-reach"]
    tables = compare_sweep([*argv, "--baseline", "algo=grpo", "--reps", "500"])
    intervals = tables["eval_accuracy_intervals"]
    assert list(intervals.index) == ["algo=grpo", "algo=dapo"]
    assert list(intervals.runs) == [5, 5]
    assert intervals.loc["algo=grpo", "mean"] == pytest.approx(0.55)
    assert intervals.loc["algo=grpo", "IQM"] == pytest.approx((0.52 + 0.55 + 0.58) / 3)
    assert intervals.loc["algo=dapo", "IQM low"] <= 0.85 <= intervals.loc["algo=dapo", "IQM high"]
    improvement = tables["eval_accuracy_improvement"].set_index("configuration")
    assert improvement.loc["algo=dapo", "P(improves)"] == 1.0  # every dapo run beats every grpo run
    # grpo's final mean 0.55: every dapo run passes it at step 3 (0.6-0.675), no grpo run before 4
    steps = tables["eval_accuracy_steps_to_reach"]
    assert steps.loc["algo=dapo", "IQM steps"] == 3.0 and steps.loc["algo=dapo", "reached"] == "5/5"
    assert steps.loc["algo=grpo", "reached"] == "3/5"  # the seeds that ended at or above it
    printed = capsys.readouterr().out
    assert "eval_accuracy_intervals" in printed and "P(improves)" in printed
    written = {path.name for path in output.iterdir()}
    assert {"eval_accuracy_intervals.png", "eval_accuracy_profile.png"} <= written
    assert {"eval_accuracy_curves.png", "eval_accuracy_intervals.csv"} <= written
    logged = {a.path for a in MlflowClient(store).list_artifacts(parent, "comparison")}
    assert "comparison/eval_accuracy_intervals.png" in logged


def test_a_sweep_of_seeds_alone_is_one_configuration(store: str, tmp_path: Path) -> None:
    make_sweep(store, GRPO, ("seed",))
    scores = final_scores(*loaded(store))
    assert list(scores) == ["all runs"] and scores["all runs"][0].size == 5
    tables = compare_sweep(["arithmetic", "--tracking-uri", store, "--output", str(tmp_path)])
    assert "eval_accuracy_improvement" not in tables  # nothing to compare with
    assert tables["eval_accuracy_intervals"].loc["all runs", "runs"] == 5


def test_two_tasks_are_strata_of_one_comparison(store: str, tmp_path: Path) -> None:
    make_sweep(store, GRPO | DAPO, ("algo", "seed"))
    # on the second task grpo wins every pair: over both tasks a tie
    flipped = {("grpo", s): v + 0.5 for (_, s), v in DAPO.items()} | {
        ("dapo", s): v for (_, s), v in GRPO.items()
    }
    make_sweep(store, flipped, ("algo", "seed"), experiment_name="medmcqa")
    argv = ["arithmetic", "medmcqa", "--tracking-uri", store, "--output", str(tmp_path)]
    tables = compare_sweep([*argv, "--baseline", "algo=grpo", "--reps", "500"])
    intervals = tables["eval_accuracy_intervals"]
    assert list(intervals.runs) == [10, 10]  # 5 seeds on each task
    improvement = tables["eval_accuracy_improvement"].set_index("configuration")
    assert improvement.loc["algo=dapo", "P(improves)"] == pytest.approx(0.5)


def loaded(store: str) -> tuple[pd.DataFrame, pd.DataFrame, str]:
    from src.tracking import compare

    client = MlflowClient(tracking_uri=store)
    runs = compare.load_runs(client, "arithmetic").assign(experiment="arithmetic")
    return runs, compare.metric_histories(client, runs, ["eval/accuracy"]), "eval/accuracy"


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (
            ["--metric", "eval/nothing"],
            "no finished run logged 'eval/nothing': pass --metric with one they logged: eval/accuracy",
        ),
        (
            ["--baseline", "algo=ppo"],
            "no configuration 'algo=ppo' to compare against: choose among algo=grpo, algo=dapo",
        ),
    ],
)
def test_wrong_input_is_one_line_naming_what_to_do(
    store, tmp_path, monkeypatch, capsys, extra, message
) -> None:
    make_sweep(store, GRPO | DAPO, ("algo", "seed"))
    argv = ["compare", "arithmetic", "--tracking-uri", store, "--output", str(tmp_path), *extra]
    monkeypatch.setattr("sys.argv", argv)
    with pytest.raises(SystemExit) as stopped:
        main()
    assert stopped.value.code == 2
    assert capsys.readouterr().err.strip().splitlines()[-1] == f"error: {message}"


def test_an_experiment_without_a_sweep_is_named(store, monkeypatch, capsys) -> None:
    mlflow.set_tracking_uri(store)
    MlflowClient(store).create_experiment("arithmetic")
    monkeypatch.setattr("sys.argv", ["compare", "arithmetic", "--tracking-uri", store])
    with pytest.raises(SystemExit):
        main()
    assert "experiment 'arithmetic' has no sweep yet" in capsys.readouterr().err
