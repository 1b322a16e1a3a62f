"""Compare a sweep's configurations over their seeds, with intervals a reviewer can trust.

    python -m src.train -m algo=grpo,dapo seed=1,2,3,4,5        # 2 configurations x 5 seeds
    python -m src.compare arithmetic --metric eval/accuracy      # its newest sweep
    python -m src.compare arithmetic --sweep ID --baseline algo=grpo --steps-to-reach

A configuration is the swept keys other than `seed`; its runs are its seeds. For each metric:
the IQM and mean of the runs' final values with 95 % stratified bootstrap intervals, and the
probability that each configuration's run beats one of the baseline's; for the first metric
the performance profile and the curves' mean with their band over steps; with
`--steps-to-reach`, the steps each configuration took to reach the baseline's final mean.
Several experiments (tasks) are strata of one comparison (a configuration must run in all).
Tables are printed and written as CSV, plots as PNG, into `--output`, and logged as artifacts of
the sweep's parent MLflow run (`comparison/`). Formulas: docs/comparisons.md.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import numpy as np
import pandas as pd
from mlflow import MlflowClient

from src.tracking import compare, comparison_plots, intervals, over_seeds
from src.utils.resolvers import PROJECT_ROOT

STORE = f"sqlite:///{PROJECT_ROOT}/outputs/mlflow.db"  # the runs' store (conf/paths)
ARTIFACTS = "comparison"  # the parent run's artifact folder for the tables and plots


def arguments(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m src.compare", description=(__doc__ or "").splitlines()[0]
    )
    parser.add_argument("experiments", nargs="+", help="MLflow experiments (task names)")
    parser.add_argument(
        "--sweep",
        action="append",
        default=[],
        help="a sweep id per experiment, in order (default: each experiment's newest sweep)",
    )
    parser.add_argument(
        "--metric",
        action="append",
        default=[],
        help="a metric to compare, repeatable; the first is plotted (default: eval/accuracy)",
    )
    parser.add_argument(
        "--baseline", help="the configuration others are compared with (default: the first)"
    )
    parser.add_argument(
        "--steps-to-reach",
        action="store_true",
        help="also the steps each configuration needs to reach the baseline's final mean",
    )
    parser.add_argument("--reps", type=int, default=intervals.REPS, help="bootstrap resamples")
    parser.add_argument("--output", type=Path, help="folder for the tables and plots")
    parser.add_argument(
        "--tracking-uri",
        default=os.environ.get("MLFLOW_TRACKING_URI", STORE),
        help="the MLflow store (default: the project's outputs/mlflow.db)",
    )
    args = parser.parse_args(argv)
    if args.sweep and len(args.sweep) != len(args.experiments):
        parser.error(
            f"--sweep given {len(args.sweep)} times for {len(args.experiments)} experiments: "
            "give one per experiment, in order, or none for each one's newest sweep"
        )
    if args.reps < 100:
        parser.error(f"--reps {args.reps} is too few for a 95 % interval: use 1000 or more")
    args.metric = args.metric or ["eval/accuracy"]
    return args


def load(client: MlflowClient, args: argparse.Namespace) -> pd.DataFrame:
    """Every experiment's sweep runs in one frame, with an `experiment` column."""
    sweeps = args.sweep or [None] * len(args.experiments)
    frames = [
        compare.load_runs(client, experiment, sweep).assign(experiment=experiment)
        for experiment, sweep in zip(args.experiments, sweeps, strict=True)
    ]
    return pd.concat(frames, ignore_index=True)


def compare_sweep(argv: list[str] | None = None) -> dict[str, pd.DataFrame]:
    """The command's work: returns the tables it printed, by name."""
    args = arguments(argv)
    client = MlflowClient(tracking_uri=args.tracking_uri)
    runs = load(client, args)
    histories = compare.metric_histories(client, runs, args.metric)
    output = args.output or PROJECT_ROOT / "outputs" / "comparisons" / runs.sweep_id.iloc[0]
    output.mkdir(parents=True, exist_ok=True)
    tables: dict[str, pd.DataFrame] = {}
    figures = {}
    for number, metric in enumerate(args.metric):
        scores = over_seeds.final_scores(runs, histories, metric)
        if not scores:
            raise compare.NoRunsFound(no_metric(client, runs, metric))
        baseline = args.baseline or next(iter(scores))
        name = metric.replace("/", "_")
        tables[f"{name}_intervals"] = over_seeds.interval_table(scores, args.reps)
        if len(scores) > 1:
            tables[f"{name}_improvement"] = over_seeds.improvement_table(
                scores, baseline, args.reps
            )
        if args.steps_to_reach:
            tables[f"{name}_steps_to_reach"] = steps_table(
                runs, histories, metric, scores, baseline, args.reps
            )
        if number == 0:
            figures[f"{name}_intervals"] = comparison_plots.plot_intervals(
                tables[f"{name}_intervals"], metric
            )
            figures[f"{name}_profile"] = comparison_plots.plot_profiles(scores, metric)
            bands = over_seeds.curve_band(runs, histories, metric)
            figures[f"{name}_curves"] = comparison_plots.plot_bands(bands, metric)
    for name, table in tables.items():
        print(f"\n{name}\n{table.to_string(float_format=lambda v: f'{v:.3f}')}")
        table.to_csv(output / f"{name}.csv")
    for name, figure in figures.items():
        figure.savefig(output / f"{name}.png", dpi=110)
    parent = parent_run(client, runs)
    if parent is not None:
        client.log_artifacts(parent, str(output), ARTIFACTS)
    print(
        f"\ntables and plots: {output}"
        + (f" (logged to run {parent}/{ARTIFACTS})" if parent else "")
    )
    return tables


def steps_table(
    runs: pd.DataFrame,
    histories: pd.DataFrame,
    metric: str,
    scores: dict[str, list[np.ndarray]],
    baseline: str,
    reps: int,
) -> pd.DataFrame:
    """Per configuration: how many runs reached the baseline's final mean, and the IQM of their
    steps to it with its interval (runs that never reached it are counted, not averaged)."""
    target = float(np.mean(np.concatenate(scores[baseline])))
    steps = over_seeds.steps_to_reach(histories, metric, target)
    labels = over_seeds.configuration_labels(runs).set_axis(runs.run_id)
    rows = []
    for config in scores:
        ids = labels[labels == config].index
        reached = steps.reindex(ids).dropna().to_numpy()
        nothing = intervals.Estimate(float("nan"), float("nan"), float("nan"))
        found = intervals.interval(reached, intervals.iqm, reps) if reached.size else nothing
        rows.append(
            {"configuration": config, "target": target, "reached": f"{reached.size}/{len(ids)}"}
            | {"IQM steps": found.point, "low": found.low, "high": found.high}
        )
    return pd.DataFrame(rows).set_index("configuration")


def no_metric(client: MlflowClient, runs: pd.DataFrame, metric: str) -> str:
    """Why no configuration has a score: no finished run, or no run logged the metric (and
    which metrics a finished run did log)."""
    finished = runs[runs.status == "FINISHED"]
    if finished.empty:
        return f"no run of the sweep finished: nothing to compare ({len(runs)} runs)"
    logged = sorted(client.get_run(finished.run_id.iloc[0]).data.metrics)
    shown = ", ".join(logged[:30]) + (", ..." if len(logged) > 30 else "")
    return f"no finished run logged '{metric}': pass --metric with one they logged: {shown}"


def parent_run(client: MlflowClient, runs: pd.DataFrame) -> str | None:
    """The first experiment's sweep parent run id, where the comparison's files are logged."""
    experiment = client.get_experiment_by_name(runs.experiment.iloc[0])
    found = client.search_runs(
        [experiment.experiment_id],
        filter_string=f"tags.sweep_id = '{runs.sweep_id.iloc[0]}' and tags.sweep_role = 'parent'",
    )
    return found[0].info.run_id if found else None


def main() -> None:
    try:
        compare_sweep(sys.argv[1:])
    except (compare.NoRunsFound, over_seeds.UnknownConfiguration) as error:
        print(f"error: {error}", file=sys.stderr)
        raise SystemExit(2) from None


if __name__ == "__main__":
    main()
