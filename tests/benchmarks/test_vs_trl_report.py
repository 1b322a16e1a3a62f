"""The report of `benchmarks/vs_trl.py`: CPU and GPU groups in tables of their own, the GPU's
named with its peak memory and the seconds to the first step of each side."""

from __future__ import annotations

import sys

from src.utils.resolvers import PROJECT_ROOT

sys.path.insert(0, str(PROJECT_ROOT / "benchmarks"))
from vs_trl_report import group_summary, markdown, text_table  # noqa: E402


def run(framework: str, round_number: int, seconds: float, gpu: float, device: str) -> dict:
    return {
        "framework": framework,
        "round": round_number,
        "dtype": "bfloat16" if device == "cuda" else "float32",
        "device": device,
        "seconds_per_step": seconds,
        "step_seconds": [seconds, seconds],
        "first_step_seconds": 10 * seconds,
        "tokens_per_second": 1000 / seconds,
        "peak_rss_gib": 2.0,
        "peak_gpu_gib": gpu,
        "mean_length": 128.0,
        "prompt_tokens": [13, 13],
        "rewards": [0.1],
        "frac_reward_zero_std": [0.0],
        "details": {},
    }


def group(shape: str, device: str) -> dict:
    runs = [
        run("ours", 1, 1.0, 4.0, device),
        run("trl", 1, 5.0, 5.0, device),
        run("ours", 2, 1.0, 4.0, device),
        run("trl", 2, 4.0, 5.0, device),
    ]
    machine = {"gpu": "NVIDIA H200"} if device == "cuda" else {}
    settings = {
        "device": device,
        "dtype": runs[0]["dtype"],
        "weights": "random" if device == "cuda" else "converted",
        "steps": 4,
        "rounds": 2,
        "measured": "2026-11-27 07:02",
        "versions": {"trl": "1.16.0"},
        "machine": machine,
    }
    return {
        "shape": shape,
        "beta": 0.04,
        "runs": runs,
        "summary": group_summary(runs),
        "settings": settings,
    }


def test_cpu_and_gpu_groups_get_tables_of_their_own():
    text = markdown({"speed": {"groups": [group("a", "cpu"), group("g", "cuda")]}})
    cpu, gpu = text.split("### GRPO on one GPU (NVIDIA H200)")
    assert "### GRPO on CPU" in cpu and "RSS GiB" in cpu and "GPU GiB" not in cpu
    assert "ours GPU GiB | TRL GPU GiB | ours s to step 1 | TRL s to step 1" in gpu
    assert "random weights" in gpu and "not equal precision" not in gpu
    # ratios 5.0 and 4.0, median 4.5; peaks 4.00 / 5.00; first steps 10.0 / 45.0
    assert "| 4.50 | 4.00 | 5.00 | 10.0 | 45.0 |" in gpu


def test_the_terminal_table_shows_the_gpu_peak():
    table = text_table(group("g", "cuda"))
    assert "GPU GiB" in table
    assert "ours/TRL tokens/s per round: [5.00, 4.00], median 4.50" in table


def test_the_table_shows_the_per_machine_choices_each_of_our_runs_took():
    shown = group("a", "cpu")
    choice = "onednn_products.128x512: False (kept at 2026-11-30 05:00:00; mkl 1000 us)"
    shown["runs"][2]["details"]["machine_choices"] = [choice]
    assert f"per-machine choices, ours round 2: {choice}" in text_table(shown)
