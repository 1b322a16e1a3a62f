"""Tables of `benchmarks/vs_trl.py`: plain text for the terminal, markdown for a README."""

from __future__ import annotations

import statistics
from typing import Any

from vs_trl_common import SHAPES


def label(run: dict[str, Any]) -> str:
    """`ours` or `TRL`, with the dtype where it is not float32 on the CPU, `compiled` where
    the run went through torch.compile."""
    compiled = " compiled" if run.get("details", {}).get("compiled") else ""
    name = ("TRL" if run["framework"] == "trl" else "ours") + compiled
    if run["dtype"] != "float32" and run.get("device", "cpu") == "cpu":
        return f"{name} ({run['dtype']})"
    return name


def fmt(value: float | None, digits: int = 3) -> str:
    return "-" if value is None or value != value else f"{value:.{digits}f}"


def rounded(values: list[float], digits: int = 3) -> str:
    return "[" + ", ".join(fmt(v, digits) for v in values) + "]"


def step_range(run: dict[str, Any]) -> str:
    """The fastest and slowest timed step of a run (`0.73-1.15`): how steady a side is, which
    the median hides."""
    seconds = run.get("step_seconds") or []
    return f"{fmt(min(seconds))}-{fmt(max(seconds))}" if seconds else "-"


def pair_ratios(runs: list[dict[str, Any]]) -> list[float]:
    """ours / TRL tokens per second of each round that has both."""
    by_round: dict[int, dict[str, float]] = {}
    for run in runs:
        by_round.setdefault(run["round"], {})[run["framework"]] = run["tokens_per_second"]
    return [
        pair["ours"] / pair["trl"]
        for _, pair in sorted(by_round.items())
        if "ours" in pair and "trl" in pair
    ]


def group_summary(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Median figures per framework, the per-round ratios and their median, and checks."""
    ratios = pair_ratios(runs)
    summary: dict[str, Any] = {
        "ratios": ratios,
        "median_ratio": statistics.median(ratios) if ratios else None,
    }
    for framework in ("ours", "trl"):
        mine = [run for run in runs if run["framework"] == framework]
        if mine:
            summary[framework] = {
                "median_seconds_per_step": statistics.median(r["seconds_per_step"] for r in mine),
                "median_tokens_per_second": statistics.median(r["tokens_per_second"] for r in mine),
                "max_peak_rss_gib": max(r["peak_rss_gib"] for r in mine),
                "max_peak_gpu_gib": max(r.get("peak_gpu_gib", float("nan")) for r in mine),
                "median_first_step_seconds": statistics.median(
                    r.get("first_step_seconds", float("nan")) for r in mine
                ),
            }
    counts = {tuple(run["prompt_tokens"]) for run in runs}
    summary["prompt_tokens_identical"] = len(counts) == 1
    summary["prompt_tokens"] = list(next(iter(counts))) if len(counts) == 1 else None
    return summary


def text_table(group: dict[str, Any]) -> str:
    """One configuration and beta: a row per run, the ratios, the rewards per step."""
    shape = SHAPES[group["shape"]]
    runs, summary = group["runs"], group["summary"]
    head = (
        f"({shape.name}) {shape.title}: B {shape.batch}, G {shape.group}, "
        f"T {shape.tokens} forced, beta {group['beta']}"
    )
    lines = [head, "-" * len(head)]
    lines.append(
        f"{'run':<40} {'round':>5} {'s/step':>8} {'step range':>13} {'to step 1':>9} "
        f"{'tok/s':>8} {'RSS GiB':>8} {'GPU GiB':>8} {'len':>6}"
    )
    for run in runs:
        lines.append(
            f"{label(run):<40} {run['round']:>5} {fmt(run['seconds_per_step']):>8} "
            f"{step_range(run):>13} {fmt(run.get('first_step_seconds'), 1):>9} "
            f"{fmt(run['tokens_per_second'], 1):>8} "
            f"{fmt(run['peak_rss_gib'], 2):>8} {fmt(run.get('peak_gpu_gib'), 2):>8} "
            f"{fmt(run['mean_length'], 1):>6}"
        )
    if summary["ratios"]:
        lines.append(
            f"ours/TRL tokens/s per round: {rounded(summary['ratios'], 2)}, "
            f"median {fmt(summary['median_ratio'], 2)}"
        )
    tokens = summary["prompt_tokens"]
    lines.append(
        f"prompt tokens identical in every run: {tokens}"
        if summary["prompt_tokens_identical"]
        else "WARNING: the runs tokenized the prompts to different lengths"
    )
    lines += [f"note: {note}" for note in group.get("notes", [])]
    for run in runs:
        details = run.get("details", {})
        if "probe_seconds" in details:
            costs = details.get("probe_seconds_by_path", {})
            paths = ", ".join(
                f"{k} {'on' if v else 'OFF'}" + (f" {costs[k]:.2f} s" if k in costs else "")
                for k, v in details["fast_paths"].items()
            )
            lines.append(
                f"fast-path probes, {label(run)} round {run['round']}: "
                f"{details['probe_seconds']:.2f} s ({paths})"
            )
    for run in runs:
        if choices := run.get("details", {}).get("machine_choices"):
            lines.append(
                f"per-machine choices, {label(run)} round {run['round']}: {'; '.join(choices)}"
            )
    for run in runs:
        marks = run.get("details", {}).get("start_marks")
        if marks:
            shown = ", ".join(f"{name} {seconds:.1f}" for name, seconds in marks.items())
            first = fmt(run.get("first_step_seconds"), 1)
            lines.append(
                f"seconds from the call to, {label(run)} round {run['round']}: {shown}, "
                f"first step end {first}"
            )
    for run in runs:
        phases = run.get("details", {}).get("phase_seconds")
        if phases:
            shares = ", ".join(f"{name} {seconds:.3f}" for name, seconds in phases.items())
            lines.append(f"seconds per phase, {label(run)} round {run['round']}: {shares}")
    for run in runs:
        lines.append(
            f"reward per step, {label(run)} round {run['round']}: {rounded(run['rewards'])}"
        )
        if any(run["frac_reward_zero_std"]):
            lines.append(f"  groups with equal rewards: {rounded(run['frac_reward_zero_std'], 2)}")
    return "\n".join(lines)


def markdown(report: dict[str, Any]) -> str:
    """The speed summary, every run, and the learning comparison, as markdown."""
    parts = []
    speed = report.get("speed")
    if speed and speed.get("groups"):
        parts.append(speed_markdown(speed["groups"]))
    learning = report.get("learning")
    if learning:
        parts.append(learning_markdown(learning))
    return "\n".join(parts) + "\n"


def speed_markdown(groups: list[dict[str, Any]]) -> str:
    """The CPU groups' tables, then the GPU groups'."""
    parts = []
    for device in ("cpu", "cuda"):
        mine = [g for g in groups if g["settings"].get("device", "cpu") == device]
        if mine:
            parts.append(device_markdown(mine, device))
    return "\n\n".join(parts)


def device_markdown(groups: list[dict[str, Any]], device: str) -> str:
    """A summary row per configuration and beta, then a row per run, for one device."""
    trl = groups[0]["settings"]["versions"].get("trl", "?")
    gpu = device == "cuda"
    where = "CPU"
    if gpu:
        where = "one GPU (" + groups[0]["settings"]["machine"].get("gpu", "CUDA") + ")"
    memory = "GPU GiB" if gpu else "RSS GiB"
    lines = [
        f"### GRPO on {where}: ours vs TRL {trl}\n",
        "Same model weights, prompt strings, dense reward, seed and settings; completion length "
        "forced in both; "
        + (
            "bf16 weights on both sides, no autocast. "
            if gpu
            else "fp32 unless marked bfloat16 (both sides). "
        )
        + "Seconds per step: median time between step ends "
        "after the first. Tokens/s: generated completion tokens per step / s per step. Rounds "
        "alternate ours, TRL, each run in a fresh process; ratio: median over rounds of ours/TRL "
        "tokens/s." + (" GPU GiB: peak torch.cuda.max_memory_allocated." if gpu else "") + "\n",
        "| config | beta | steps x rounds | ours s/step | TRL s/step | ours tok/s | TRL tok/s | "
        f"ours/TRL tok/s | ours {memory} | TRL {memory} | ours s to step 1 | TRL s to step 1 |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    peak = "max_peak_gpu_gib" if gpu else "max_peak_rss_gib"
    for group in groups:
        shape, summary, settings = SHAPES[group["shape"]], group["summary"], group["settings"]
        ours, theirs = summary.get("ours", {}), summary.get("trl", {})
        name = f"({shape.name}) {shape.title}, B {shape.batch} G {shape.group} T {shape.tokens}"
        if settings["dtype"] != "float32" and not gpu:
            name += f", both {settings['dtype']} (ours model.dtype, TRL bf16=True)"
        if settings.get("weights") == "random" and shape.model != "tiny":
            name += ", random weights"
        if settings.get("ours_override"):
            name += f", ours with {' '.join(settings['ours_override'])}"
        if settings.get("compile"):
            name += ", both compiled (ours model.compile, TRL torch_compile)"
        lines.append(
            f"| {name} | {group['beta']} | {settings['steps']} x {settings['rounds']} | "
            f"{fmt(ours.get('median_seconds_per_step'))} | "
            f"{fmt(theirs.get('median_seconds_per_step'))} | "
            f"{fmt(ours.get('median_tokens_per_second'), 1)} | "
            f"{fmt(theirs.get('median_tokens_per_second'), 1)} | "
            f"{fmt(summary['median_ratio'], 2)} | {fmt(ours.get(peak), 2)} | "
            f"{fmt(theirs.get(peak), 2)} | {fmt(ours.get('median_first_step_seconds'), 1)} | "
            f"{fmt(theirs.get('median_first_step_seconds'), 1)} |"
        )
    lines += [
        "",
        "| config | beta | run | round | s/step | fastest-slowest step | s to step 1 | tok/s "
        f"| peak {memory} | mean length |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    run_peak = "peak_gpu_gib" if gpu else "peak_rss_gib"
    for group in groups:
        for run in group["runs"]:
            lines.append(
                f"| {group['shape']} | {group['beta']} | {label(run)} | {run['round']} | "
                f"{fmt(run['seconds_per_step'])} | {step_range(run)} | "
                f"{fmt(run.get('first_step_seconds'), 1)} | "
                f"{fmt(run['tokens_per_second'], 1)} | {fmt(run.get(run_peak), 2)} | "
                f"{fmt(run['mean_length'], 1)} |"
            )
    measured = sorted({group["settings"].get("measured", "?") for group in groups})
    lines.append(f"\nMeasured {', '.join(measured)}. Notes:\n")
    notes = dict.fromkeys(note for group in groups for note in group.get("notes", []))
    lines += [f"- {note}" for note in notes]
    return "\n".join(lines)


def learning_markdown(learning: dict[str, Any]) -> str:
    steps, window = learning["steps"], learning["window"]
    lines = [
        f"\n### Learning parity: task=arithmetic, same warm start and seed, {steps} GRPO steps\n",
        f"| seed | framework | mean reward, steps {window[0]}-{window[1]} | std per step | "
        "standard error | mean reward, all steps |",
        "|---|---|---|---|---|---|",
    ]
    for run in learning["runs"]:
        lines.append(
            f"| {run['seed']} | {'TRL' if run['framework'] == 'trl' else 'ours'} | "
            f"{fmt(run['window_mean'])} | {fmt(run['window_std'])} | {fmt(run['window_sem'])} | "
            f"{fmt(run['mean'])} |"
        )
    lines.append(
        "\nBoth start from the warm start our run cached, draw the same rows in the same order, "
        "and score them with our reward; every setting is read from our composed config. Ours "
        "leaves zero-advantage completions out of the update (algo.skip_zero_advantage, same "
        "gradient); TRL runs them."
    )
    return "\n".join(lines)


def learning_text(run: dict[str, Any], window: tuple[int, int]) -> str:
    """Reward per step in rows of 20, and the window's mean and spread."""
    name = "TRL" if run["framework"] == "trl" else "ours"
    rewards = run["rewards"]
    lines = [f"{name}, seed {run['seed']}: reward per step"]
    for start in range(0, len(rewards), 20):
        lines.append(f"  {start + 1:>4}: {rounded(rewards[start : start + 20], 2)}")
    lines.append(
        f"  steps {window[0]}-{window[1]}: mean {fmt(run['window_mean'])}, std per step "
        f"{fmt(run['window_std'])} (standard error {fmt(run['window_sem'])}); "
        f"all steps: mean {fmt(run['mean'])}; {fmt(run['wall_seconds'], 0)} s wall"
        + (" (incl. the warm start when it was not cached)" if name == "ours" else "")
    )
    return "\n".join(lines)
