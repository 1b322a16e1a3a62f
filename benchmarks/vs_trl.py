"""Our GRPO training path side by side with TRL's `GRPOTrainer` on identical work, on the CPU
or on one GPU (--device cuda).

Speed mode (default) times both on the same work: the same model folder and weights, the same
prompt strings (TRL gets them as a plain-text `prompt` column, ours as data rows its generator
role turns into the very same strings; the token counts are checked equal), the same dense
reward (share of digits plus half the share of vowels of the completion), B prompts x G
completions, completion length forced to T in both (ours `rollout.min_completion_length`, TRL
`generation_kwargs={"min_new_tokens": T}`), temperature 1, top_p 1, no top-k, loss `grpo`,
rewards scaled per group, lr 1e-6 with a linear schedule, AdamW (torch.optim.AdamW in both)
betas (0.9, 0.99), gradient clipping at 1.0, one update per rollout, fp32, the same seed.
Configurations: (a) tiny Llama, full fine-tuning, B 8, G 8, T 64; (b) SmolLM2-135M-Instruct +
LoRA r16/alpha 32 on q,k,v,o, B 4, G 4, T 64; (c) as (b) with 512-token retrieval-shaped
prompts, B 2, G 8, T 32; (e) Gemma 3 270M (262k vocabulary, sliding-window layers) + LoRA as (b),
B 4, G 4, T 64 (--configs e; not in the default set). Each beta (KL weight) in --betas, for --rounds rounds of
ours-then-TRL, each run in a fresh subprocess. Per run: seconds per step (median time between
consecutive step ends, the first step excluded as warm-up; a step is everything the framework
does: generation, reward, losses, backward, optimizer, logging), completion tokens per second
(generated tokens per step / s per step), peak RSS of the worker, mean completion length,
mean reward per step, and the median seconds of each phase of a step: ours' `timing/<phase>`
(sampling, reward, log_probs, update), TRL's timed around its model's generate, the reward
function, its per-token log-prob forwards and the backward; `rest` is the step outside them
(TRL's optimizer step among it). Printed, and written to --out (JSON) and vs_trl.md beside it.

--dtype bfloat16 on the CPU compares at equal precision: ours `model.dtype=bfloat16` (the frozen
base in bfloat16, every pass under bfloat16 autocast, LoRA weights, log-softmax and optimizer in
float32), TRL's `bf16=True` (accelerate's bfloat16 autocast over float32 weights, as TRL runs on
a CPU with bfloat16).

On a GPU (--device cuda) both sides run on one CUDA device with bf16 weights and no autocast
(ours `hardware=[gpu]`, i.e. Lightning's bf16-true; TRL the model loaded in bf16 with
bf16=False and its LoRA weights, which peft makes in fp32, cast back to bf16), and each run
also reports its peak GPU memory (torch.cuda.max_memory_allocated). Configurations (a), (g)
SmolLM2-135M + LoRA r16 on q,k,v,o, B 8, G 8, T 128, and (h) the same with B 16, G 8, T 256;
SmolLM2's shape gets random weights there (--weights random: its config and tokenizer from
outputs/models/smollm2_135m_instruct or outputs/models/smollm2_135m_config), since forced
lengths make the work the same whatever the weights say. (i) and (j) are (g) and (h) with
Gemma 3 270M's shape (262k vocabulary, sliding-window layers), random weights from
outputs/models/gemma3_270m or outputs/models/gemma3_270m_config: --configs i,j.

Learning mode (--learning) compares learning on the embedded arithmetic task: ours with its
defaults (SFT warm start, then --learning-steps GRPO steps), then TRL from the warm start our
run cached, with the same rows in the same order, our role's prompts, our reward, and every
setting read from our composed config. Reward per step, and its mean and spread over the last
fifth of the steps (steps 80-100 by default), per seed in --seeds.

    nice .venv/bin/python benchmarks/vs_trl.py                      # a, b, c; beta 0 and 0.04
    nice .venv/bin/python benchmarks/vs_trl.py --configs a --betas 0.0 --steps 3 --rounds 1
    nice .venv/bin/python benchmarks/vs_trl.py --configs b,e --dtype bfloat16   # equal precision
    nice .venv/bin/python benchmarks/vs_trl.py --configs a --steps 20 --compile  # both compiled
    nice .venv/bin/python benchmarks/vs_trl.py --learning [--learning-steps 100] [--seeds 42,43]
    python benchmarks/vs_trl.py --device cuda --betas 0.04 --rounds 2   # a, g, h on one GPU

Needs TRL: pip install .[bench]
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.metadata
import json
import math
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from vs_trl_common import (
    DEFAULT_CONFIGS,
    REPO,
    SHAPES,
    RunResult,
    Shape,
    build_random_model,
    make_prompts,
)
from vs_trl_report import group_summary, learning_text, markdown, text_table
from vs_trl_trl import require_trl

FRAMEWORKS = ("ours", "trl")
SHORT_PROMPT_TOKENS = 16  # about the tokens of one of `make_prompts`' short questions


# ------------------------------------------------------------------------------------ workers
def worker(spec_path: Path, result_path: Path) -> None:
    """Run one side once, in this fresh process, and write its result."""
    spec = json.loads(spec_path.read_text())
    if spec["framework"] == "ours":
        import vs_trl_ours as side
    else:
        import vs_trl_trl as side
    if spec["mode"] == "speed":
        side.run_speed(spec).save(result_path)
    else:
        result_path.write_text(json.dumps(side.run_learning(spec)))


def run_worker(spec: dict[str, Any], work: Path, name: str) -> Path:
    """Start a worker subprocess for `spec`; its output goes to a log, shown if it fails."""
    folder = work / name
    folder.mkdir(parents=True)
    spec = {**spec, "folder": str(folder)}
    spec_path, result, log = folder / "spec.json", folder / "result.json", folder / "log.txt"
    spec_path.write_text(json.dumps(spec))
    command = [sys.executable, str(Path(__file__).resolve()), "worker", str(spec_path), str(result)]
    env = {**os.environ, "TOKENIZERS_PARALLELISM": "false", "HF_HUB_OFFLINE": "1"}
    print(f"  running {name} ...", flush=True)
    with log.open("w") as out:
        finished = subprocess.run(command, stdout=out, stderr=subprocess.STDOUT, env=env, cwd=REPO)
    if finished.returncode or not result.exists():
        tail = "\n".join(log.read_text(errors="replace").splitlines()[-40:])
        raise SystemExit(f"worker {name} failed (exit {finished.returncode}):\n{tail}")
    return result


# ------------------------------------------------------------------------------------ setup
def ensure_model_folder(shape: Shape, random_weights: bool = False) -> Path:
    """The model folder of a shape, made when it is not there yet: the tiny model built, or
    SmolLM2 or Gemma 3 270M converted, into outputs/models with our model config; or, with
    `random_weights`, the model's config and tokenizer with random weights (from the
    converted folder, or from its `_config` folder where only those files were carried)."""
    folder = shape.folder(random_weights)
    if (folder / "config.json").exists():
        return folder
    if random_weights:
        places = shape.random_sources()
        sources = [f for f in places if (f / "config.json").exists()]
        if not sources:
            raise SystemExit(
                f"--weights random needs the {shape.model} config.json and tokenizer files in "
                f"{places[0]} or {places[1]}"
            )
        build_random_model(sources[0], folder)
        return folder
    from hydra.utils import instantiate

    from src.utils.compose import compose_train_config

    cfg = compose_train_config([f"model={shape.model}", f"paths.models_dir={folder.parent}"])
    if shape.model == "tiny":
        instantiate(cfg.model.builder)(cfg.model.name_or_path)
    else:
        from src.model.offline import convert_gguf

        packaged = dict(cfg.model.offline_fallback)
        packaged.pop("copy_of", None)  # which hub model it is a copy of: not a conversion setting
        convert_gguf(**packaged)
    if not (folder / "config.json").exists():
        raise SystemExit(f"expected our model config to write {folder}")
    return folder


def versions() -> dict[str, str]:
    found = {}
    for package in ("torch", "transformers", "trl", "peft", "lightning", "accelerate"):
        try:
            found[package] = importlib.metadata.version(package)
        except importlib.metadata.PackageNotFoundError:
            found[package] = "not installed"
    return found


def available_gib() -> float | None:
    """MemAvailable of /proc/meminfo in GiB (None where there is no such file)."""
    try:
        lines = Path("/proc/meminfo").read_text().splitlines()
    except OSError:
        return None
    found = [line.split()[1] for line in lines if line.startswith("MemAvailable:")]
    return int(found[0]) / 2**20 if found else None


def warn_memory(args: argparse.Namespace) -> None:
    """TRL scores every completion with its whole prompt: on (c) its worker peaks near
    20 GiB (ours about 6), so say so before starting where less is free."""
    free = available_gib()
    if "c" in args.configs and "trl" in args.frameworks and free is not None and free < 22:
        print(f"warning: TRL on (c) peaked near 20 GiB RSS here, and {free:.1f} GiB is free")


def machine() -> dict[str, Any]:
    found = {"cpus": os.cpu_count(), "platform": platform.platform(), "python": sys.version}
    with contextlib.suppress(OSError, StopIteration):  # no /proc here, or no model name
        found["cpu"] = next(
            line.split(":", 1)[1].strip()
            for line in Path("/proc/cpuinfo").read_text().splitlines()
            if line.startswith("model name")
        )
    import torch

    if torch.cuda.is_available():
        found["gpu"] = torch.cuda.get_device_name(0)
        found["cuda"] = torch.version.cuda
    return found


# ------------------------------------------------------------------------------------ speed
def speed_group(
    shape: Shape,
    beta: float,
    args: argparse.Namespace,
    prompts: list[str],
    work: Path,
    folder: Path,
) -> dict[str, Any]:
    """Alternating runs of one configuration and beta: ours, TRL, ours, TRL, ..."""
    runs = []
    for round_number in range(1, args.rounds + 1):
        for framework in args.frameworks:
            spec = {
                "mode": "speed",
                "framework": framework,
                "shape": shape.name,
                "beta": beta,
                "steps": args.steps,
                "seed": args.seed,
                "dtype": args.dtype,  # both sides: TRL with bf16=True on the CPU
                "device": args.device,
                "model_folder": str(folder),
                "overrides": args.ours_override if framework == "ours" else [],
                "compile": args.compile,
                "prompts": prompts,
            }
            name = f"{shape.name}-beta{beta}-r{round_number}-{framework}"
            result = RunResult.load(run_worker(spec, work, name))
            runs.append({**result.summary(), "round": round_number})
    group = {"shape": shape.name, "beta": beta, "prompts": prompts, "runs": runs}
    group["summary"] = group_summary(runs)
    return group


def run_speed(args: argparse.Namespace, work: Path) -> dict[str, Any]:
    warn_memory(args)
    settings = {
        key: getattr(args, key)
        for key in (
            "steps",
            "rounds",
            "frameworks",
            "dtype",
            "seed",
            "ours_override",
            "compile",
            "device",
            "weights",
        )
    }
    folders = {
        name: ensure_model_folder(SHAPES[name], args.weights == "random") for name in args.configs
    }
    settings.update(
        measured=time.strftime("%Y-%m-%d %H:%M"),
        versions=versions(),
        machine=machine(),
        choices=(
            machine_choices(
                [(folders[name], pass_tokens(SHAPES[name])) for name in args.configs], args.dtype
            )
            if args.device == "cpu"
            else []
        ),
    )
    print("per-machine choices:\n" + "\n".join(f"  {c}" for c in settings["choices"]), flush=True)
    groups = []
    for name, folder in folders.items():
        shape = SHAPES[name]
        prompts = make_prompts(shape, folder)
        for beta in args.betas:
            print(f"({name}) beta {beta}:", flush=True)
            group = speed_group(shape, beta, args, prompts, work, folder)
            group["settings"] = settings
            group["notes"] = notes(group)
            print("\n" + text_table(group) + "\n", flush=True)
            groups.append(group)
    return {"groups": groups}


def notes(group: dict[str, Any]) -> list[str]:
    """What differs between the two sides by design, for the record."""
    found = []
    ours = [run for run in group["runs"] if run["framework"] == "ours"]
    if ours and ours[0]["details"].get("skip_zero_advantage") and group["beta"] == 0:
        found.append(
            "ours: algo.skip_zero_advantage is on and beta is 0, so completions whose advantage "
            "is exactly 0 are left out of the forward/backward (same gradient); TRL runs them. "
            "The dense reward makes such completions rare (frac_reward_zero_std: share of "
            "groups with all-equal rewards)"
        )
    if ours and ours[0]["details"].get("max_tokens_per_pass", "unset") is None:
        found.append(
            "ours: algo.max_tokens_per_pass=null, so each update is one forward and backward "
            "over all B x G completions, as TRL's (per_device_train_batch_size is the whole "
            "batch); our default, 4096 tokens per pass, runs (a) in two passes for less memory"
        )
    found += [
        "TRL: optim=adamw_torch (torch.optim.AdamW as ours; TRL's default is "
        "adamw_torch_fused) and gradient_checkpointing=False (TRL's default is True; ours "
        "runs without)",
        "ours runs a held-out evaluation of one prompt before the first and after the last "
        "step; neither is inside the timed intervals",
    ]
    return found


def group_key(group: dict[str, Any]) -> tuple[Any, ...]:
    settings = group["settings"]
    return (
        group["shape"],
        group["beta"],
        settings["dtype"],
        settings.get("compile", False),
        settings.get("device", "cpu"),
    )


# ------------------------------------------------------------------------------------ learning
def learning_window(steps: int) -> tuple[int, int]:
    """The last fifth of the steps, as first and last step numbers: 80-100 of 100."""
    return max(1, math.floor(0.8 * steps)), steps


def learning_figures(run: dict[str, Any], window: tuple[int, int]) -> dict[str, Any]:
    rewards = run["rewards"][window[0] - 1 : window[1]]
    spread = statistics.stdev(rewards) if len(rewards) > 1 else float("nan")
    return {
        **run,
        "window_mean": statistics.fmean(rewards) if rewards else float("nan"),
        "window_std": spread,
        "window_sem": spread / math.sqrt(len(rewards)) if rewards else float("nan"),
        "mean": statistics.fmean(run["rewards"]) if run["rewards"] else float("nan"),
    }


def run_learning(args: argparse.Namespace, work: Path) -> dict[str, Any]:
    window = learning_window(args.learning_steps)
    runs = []
    for seed in args.seeds:
        for framework in args.frameworks:  # ours first: it caches the warm start TRL starts from
            spec = {
                "mode": "learning",
                "framework": framework,
                "seed": seed,
                "steps": args.learning_steps,
                "compile": args.compile,
            }
            result = json.loads(run_worker(spec, work, f"learning-s{seed}-{framework}").read_text())
            run = learning_figures(result, window)
            print(learning_text(run, window), flush=True)
            runs.append(run)
    for framework in args.frameworks:
        means = [run["window_mean"] for run in runs if run["framework"] == framework]
        if len(means) > 1:
            print(
                f"{framework}: mean over seeds of the steps {window[0]}-{window[1]} means "
                f"{statistics.fmean(means):.3f} (std over seeds {statistics.stdev(means):.3f})"
            )
    return {"steps": args.learning_steps, "window": list(window), "seeds": args.seeds, "runs": runs}


# ------------------------------------------------------------------------------------ main
def names(text: str) -> list[str]:
    return [part.strip() for part in text.split(",") if part.strip()]


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--configs",
        type=names,
        default=None,
        help=f"any of {','.join(sorted(SHAPES))}; default {','.join(DEFAULT_CONFIGS['cpu'])} "
        f"on the CPU, {','.join(DEFAULT_CONFIGS['cuda'])} on a GPU",
    )
    parser.add_argument(
        "--device",
        choices=("cpu", "cuda"),
        default="cpu",
        help="cuda: both sides on one GPU in bf16 (ours hardware=[gpu], TRL bf16 weights)",
    )
    parser.add_argument(
        "--weights",
        choices=("converted", "random"),
        default=None,
        help="SmolLM2's converted weights (default on the CPU) or random weights of its shape "
        "(default on a GPU, where the weights cannot be carried; forced lengths make the work "
        "the same)",
    )
    parser.add_argument(
        "--betas", type=lambda t: [float(b) for b in names(t)], default=[0.0, 0.04], help="0.0,0.04"
    )
    parser.add_argument("--steps", type=int, default=6, help="GRPO steps per timed run")
    parser.add_argument("--rounds", type=int, default=2, help="alternating ours/TRL rounds")
    parser.add_argument("--frameworks", type=names, default=list(FRAMEWORKS), help="ours,trl")
    parser.add_argument(
        "--dtype",
        choices=("float32", "bfloat16"),
        default=None,
        help="ours only on the CPU (TRL is fp32 there); both sides on a GPU (default bfloat16)",
    )
    parser.add_argument("--seed", type=int, default=42, help="seed of the speed runs")
    parser.add_argument(
        "--compile",
        action="store_true",
        help="both sides compiled: ours model.compile=true, TRL torch_compile=True",
    )
    parser.add_argument(
        "--ours-override",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="ours only, repeatable: a config override, e.g. rollout.packed_weights=false",
    )
    parser.add_argument(
        "--out",
        type=Path,
        default=REPO / "outputs/benchmarks/vs_trl.json",
        help="vs_trl.md goes beside",
    )
    parser.add_argument("--learning", action="store_true", help="compare learning instead")
    parser.add_argument("--learning-steps", type=int, default=100, help="GRPO steps per side")
    parser.add_argument(
        "--seeds", type=lambda t: [int(s) for s in names(t)], default=[42], help="learning: 42,43"
    )
    args = parser.parse_args(argv)
    args.configs = args.configs or DEFAULT_CONFIGS[args.device]
    args.weights = args.weights or ("random" if args.device == "cuda" else "converted")
    args.dtype = args.dtype or ("bfloat16" if args.device == "cuda" else "float32")
    unknown = sorted(set(args.configs) - set(SHAPES))
    if unknown:
        parser.error(f"--configs: unknown {unknown}; choose among {', '.join(sorted(SHAPES))}")
    unknown = sorted(set(args.frameworks) - set(FRAMEWORKS))
    if unknown:
        parser.error(f"--frameworks: unknown {unknown}; choose among {', '.join(FRAMEWORKS)}")
    if args.steps < 2 or args.learning_steps < 1 or args.rounds < 1:
        parser.error("--steps must be >= 2 (the first step is not timed), --rounds >= 1")
    args.frameworks = [name for name in FRAMEWORKS if name in args.frameworks]  # ours first
    return args


def save(report: dict[str, Any], out: Path) -> None:
    """Write the JSON and the markdown. An earlier report's other section is kept, and so are
    its speed groups (configuration, beta, dtype) that this run did not measure again."""
    out.parent.mkdir(parents=True, exist_ok=True)
    previous = json.loads(out.read_text()) if out.exists() else {}
    merged = {**previous, **report}
    if "speed" in report and "speed" in previous:
        fresh = {group_key(group) for group in report["speed"]["groups"]}
        earlier = [g for g in previous["speed"].get("groups", []) if "settings" in g]
        kept = [g for g in earlier if group_key(g) not in fresh]
        order = {name: i for i, name in enumerate(SHAPES)}
        groups = sorted(
            kept + report["speed"]["groups"],
            key=lambda g: (
                g["settings"].get("device", "cpu"),
                order[g["shape"]],
                g["beta"],
                g["settings"]["dtype"],
            ),
        )
        merged["speed"] = {"groups": groups}
    out.write_text(json.dumps(merged, indent=2, default=str))
    out.with_name("vs_trl.md").write_text(markdown(merged))
    print(f"wrote {out} and {out.with_name('vs_trl.md')}")


def pass_tokens(shape: Shape) -> int:
    """About the tokens of one of our log-prob passes on `shape` (each prompt once, every
    completion; our runs here take one pass a step): what its verdicts are timed at."""
    prompt = shape.prompt_tokens or SHORT_PROMPT_TOKENS
    return shape.completions * shape.tokens + shape.batch * prompt


def machine_choices(models: Iterable[tuple[Path, int | None]], dtype: str = "float32") -> list[str]:
    """This machine's per-machine choices for the models in `models` (a folder, and the tokens
    of a log-prob pass or None), as our runs will take them (read where kept, timed now where
    not, at each model's own widths and its passes' rows), with their source and timings: the
    log-prob passes' products through oneDNN or MKL (and where oneDNN, their gradients'), and
    decoding's of `dtype` weights (float32, or bfloat16 for `--dtype bfloat16`)."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    from src.model.fast import onednn
    from src.utils import per_machine

    for folder, tokens in models:
        with torch.device("meta"):  # shapes only, no weights
            network = AutoModelForCausalLM.from_config(AutoConfig.from_pretrained(folder))
        rows = None if tokens is None else onednn.pass_rows(tokens)
        onednn.ask_all(onednn.widths_of(network), rows, getattr(torch, dtype))
    return per_machine.choice_lines()


def main(argv: list[str]) -> None:
    if argv[:1] == ["worker"]:
        worker(Path(argv[1]), Path(argv[2]))
        return
    args = parse_args(argv)
    if "trl" in args.frameworks:
        require_trl()
    with tempfile.TemporaryDirectory(prefix="vs_trl_") as folder:
        work = Path(folder)
        if args.learning:
            report = {"learning": run_learning(args, work)}
        else:
            report = {"speed": run_speed(args, work)}
    save(report, args.out)


if __name__ == "__main__":
    main(sys.argv[1:])
