"""What each fast path earns: our training path on the benchmark's work with each fast path left
out in turn (`GRPO_FAST_PATHS_OFF`), all of them left out, and none, taking turns.

Each run is a fresh process on the work of `benchmarks/vs_trl.py` (its configurations (a), (b),
(c), one update pass as TRL's). Per setting: the median seconds per step over rounds, and what
the path earns: the default's completion tokens per second over the setting's, minus one (so
0.10 means the default is 10% faster with the path than without it). The probes' own cost at
start-up is printed for the default.

    nice .venv/bin/python benchmarks/fast_paths.py --configs a --steps 10 --rounds 3
    nice .venv/bin/python benchmarks/fast_paths.py --configs b --steps 3 --rounds 1
    nice .venv/bin/python benchmarks/fast_paths.py --configs e --steps 3 --rounds 1   # Gemma 3 270M
    nice .venv/bin/python benchmarks/fast_paths.py --configs e --paths lean_layers   # one path
    nice .venv/bin/python benchmarks/fast_paths.py --retime   # per-machine choices timed anew

`--retime` times every per-machine choice again (the products through oneDNN or MKL), alone on
the machine, prints what was kept and what it is now, and keeps the new verdict where it is
clear (`src.utils.per_machine`).
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
from pathlib import Path
from typing import Any

from vs_trl import ensure_model_folder, run_worker
from vs_trl_common import SHAPES, RunResult, make_prompts

OFF = "GRPO_FAST_PATHS_OFF"
# label -> what $GRPO_FAST_PATHS_OFF says; "" is the default, every proven path on
SETTINGS = {
    "default": "",
    "no lean_layers": "lean_layers",
    "no shared_prompt": "shared_prompt",
    "no fused_steps": "fused_steps",
    "no packed_weights": "packed_weights",
    "no cache_room": "cache_room",
    "no onednn_products": "onednn_products",
    "no chunked_head": "chunked_head",
    "none (all off)": "all",
}


def chosen_settings(paths: str) -> dict[str, str]:
    """The default beside the settings leaving out each of `paths` (comma-separated values of
    $GRPO_FAST_PATHS_OFF), or every setting when `paths` is empty."""
    if not paths:
        return dict(SETTINGS)
    by_value = {off: label for label, off in SETTINGS.items()}
    unknown = [path for path in paths.split(",") if path not in by_value]
    if unknown:
        known = ", ".join(off for off in SETTINGS.values() if off)
        raise SystemExit(f"--paths: unknown {', '.join(unknown)}; choose from {known}")
    return {"default": ""} | {by_value[path]: path for path in paths.split(",")}


def measure(
    shape_name: str, beta: float, steps: int, rounds: int, work: Path, settings: dict[str, str]
) -> dict[str, Any]:
    """Rounds of every one of `settings` in turn; per setting its runs' summaries."""
    shape = SHAPES[shape_name]
    folder = ensure_model_folder(shape)
    prompts = make_prompts(shape, folder)
    found: dict[str, list[dict[str, Any]]] = {label: [] for label in settings}
    for round_number in range(1, rounds + 1):
        for label, off in settings.items():
            os.environ[OFF] = off
            spec = {
                "mode": "speed",
                "framework": "ours",
                "shape": shape_name,
                "beta": beta,
                "steps": steps,
                "seed": 42,
                "dtype": "float32",
                "overrides": [],
                "compile": False,
                "prompts": prompts,
                "device": "cpu",
                "model_folder": str(folder),
            }
            name = f"{shape_name}-beta{beta}-r{round_number}-{off or 'default'}"
            found[label].append(RunResult.load(run_worker(spec, work, name)).summary())
    os.environ.pop(OFF, None)
    return found


def report(shape_name: str, beta: float, found: dict[str, list[dict[str, Any]]]) -> str:
    default_rate = statistics.median(r["tokens_per_second"] for r in found["default"])
    lines = [
        f"({shape_name}) beta {beta}: {SHAPES[shape_name].title}",
        f"{'setting':<20} {'s/step':>8} {'tok/s':>8} {'earns':>7} {'sampling':>9} {'RSS GiB':>8}"
        "  per round s/step",
    ]
    for label, runs in found.items():
        seconds = statistics.median(r["seconds_per_step"] for r in runs)
        rate = statistics.median(r["tokens_per_second"] for r in runs)
        earns = "" if label == "default" else f"{default_rate / rate - 1:+.1%}"
        sampling = statistics.median(
            r["details"].get("phase_seconds", {}).get("sampling", float("nan")) for r in runs
        )
        memory = statistics.median(r["peak_rss_gib"] for r in runs)
        rounds = ", ".join(f"{r['seconds_per_step']:.3f}" for r in runs)
        lines.append(
            f"{label:<20} {seconds:>8.3f} {rate:>8.1f} {earns:>7} {sampling:>9.3f} {memory:>8.2f}"
            f"  {rounds}"
        )
    probes = [r["details"].get("probe_seconds") for r in found["default"]]
    lines.append(f"probes at start-up, default runs: {', '.join(f'{p:.2f} s' for p in probes)}")
    return "\n".join(lines)


def retime() -> list[str]:
    """Every per-machine choice kept on this machine timed again (at the widths it was kept
    for): its kept verdict dropped, measured anew (kept when clear); one line each, what was
    kept before and what holds now."""
    from src.model.fast import onednn
    from src.utils import per_machine

    lines = []
    for name in per_machine.kept_names():
        decide = onednn.decider(name)
        if decide is None:
            continue
        before = per_machine.kept(name)
        per_machine.forget(name)
        onednn.forget_verdicts()  # this process's answers too
        decide()
        now = per_machine.choice_descriptions()[name]
        was = "nothing" if before is None else f"{before['value']!r} ({before.get('measured_at')})"
        lines.append(f"{name}: kept before {was}; now {now}")
    if not lines:
        lines.append(
            f"no per-machine choice is kept for this machine in {per_machine.folder()}: "
            "nothing to time again (a run measures and keeps them when it first needs them)"
        )
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--configs", default="a", help="comma-separated: a, b, c, e")
    parser.add_argument("--beta", type=float, default=0.04)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument(
        "--paths",
        default="",
        help="comma-separated paths to leave out, each in turn beside the default "
        "(e.g. lean_layers,all); every setting when not given",
    )
    parser.add_argument(
        "--retime", action="store_true", help="time every per-machine choice again, and stop"
    )
    args = parser.parse_args()
    if args.retime:
        print("\n".join(retime()), flush=True)
        return
    settings = chosen_settings(args.paths)
    with tempfile.TemporaryDirectory(prefix="fast_paths_") as scratch:
        for name in args.configs.split(","):
            work = Path(scratch) / name
            found = measure(name, args.beta, args.steps, args.rounds, work, settings)
            print("\n" + report(name, args.beta, found) + "\n", flush=True)


if __name__ == "__main__":
    main()
