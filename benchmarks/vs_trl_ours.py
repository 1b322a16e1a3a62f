"""Our side of `benchmarks/vs_trl.py`: one run of `src.train.train` in this process, timed by a
Lightning callback at the end of every step, its figures read back from MLflow."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import lightning as L
from omegaconf import DictConfig, open_dict
from vs_trl_common import (
    LORA_TARGETS,
    MODELS_DIR,
    REPO,
    SHAPES,
    TRAIN_SETTINGS,
    RunResult,
    Shape,
    peak_gpu_gib,
    peak_rss_gib,
    phase_seconds,
    step_seconds,
)

STEP_ENDS: list[float] = []  # filled by StepClock: this process runs one training only
MARKS: dict[str, float] = {}  # when the run reached each point before its first step


class StepClock(L.Callback):
    """Notes the time at the end of every training batch, i.e. of every GRPO step (one
    optimizer update per rollout), after the module's own logging; and when the fit started
    (model loaded, Lightning set up), training started (after what runs before the first
    step) and the first step started."""

    def on_fit_start(self, trainer: L.Trainer, *args: Any, **kwargs: Any) -> None:
        MARKS.setdefault("fit_start", time.perf_counter())

    def on_train_start(self, trainer: L.Trainer, *args: Any, **kwargs: Any) -> None:
        MARKS.setdefault("train_start", time.perf_counter())

    def on_train_batch_start(self, trainer: L.Trainer, *args: Any, **kwargs: Any) -> None:
        MARKS.setdefault("first_step_start", time.perf_counter())

    def on_train_batch_end(self, trainer: L.Trainer, *args: Any, **kwargs: Any) -> None:
        STEP_ENDS.append(time.perf_counter())


# ------------------------------------------------------------------------------ configuration
def model_overrides(shape: Shape, dtype: str, folder: Path, device: str = "cpu") -> list[str]:
    """Our model group for a shape: the tiny Llama, or the local SmolLM2 folder with LoRA; on
    a GPU `hardware=[gpu]` (bf16 weights, Lightning's bf16-true) with `lora` where the shape
    has it."""
    hardware = [f"hardware=[gpu{',lora' if shape.lora else ''}]"] if device == "cuda" else []
    common = [*hardware, f"paths.models_dir={MODELS_DIR}", f"model.dtype={dtype}"]
    if not shape.lora:
        return [f"model={shape.model}", *common]
    return [
        f"model={shape.model}",
        *common,
        f"model.name_or_path={folder}",  # the same weights TRL loads, never the hub's
        "model.lora.r=16",
        "model.lora.lora_alpha=32",
        "model.lora.lora_dropout=0.0",
        f"model.lora.target_modules=[{','.join(LORA_TARGETS)}]",
    ]


def speed_overrides(
    shape: Shape,
    beta: float,
    steps: int,
    seed: int,
    dtype: str,
    folder: Path,
    model_folder: Path,
    device: str = "cpu",
) -> list[str]:
    """Overrides for a timed run: no warm start, no evaluation or checkpoint during the steps,
    forced completion length, the shared training settings; everything written under `folder`."""
    s = TRAIN_SETTINGS
    return [
        *model_overrides(shape, dtype, model_folder, device),
        f"seed={seed}",
        "sft.enabled=false",
        f"trainer.max_steps={steps}",
        f"trainer.val_check_interval={steps}",  # the only evaluation is after the last step end
        f"data.path={folder / 'train.jsonl'}",  # exactly the B prompts: every step uses all of them
        f"data.val_path={folder / 'val.jsonl'}",  # one held-out prompt
        f"data.batch_size={shape.batch}",
        "data.eval_batch_size=1",
        f"algo.group_size={shape.group}",
        f"algo.kl_beta={beta}",
        f"algo.max_completion_length={shape.tokens}",
        f"rollout.min_completion_length={shape.tokens}",
        f"rollout.temperature={s['temperature']}",
        f"rollout.top_p={s['top_p']}",
        f"rollout.top_k={s['top_k']}",
        f"algo.loss_type={s['loss_type']}",
        f"algo.scale_rewards={s['scale_rewards']}",
        f"algo.num_iterations={s['num_iterations']}",
        f"algo.max_grad_norm={s['max_grad_norm']}",
        # one forward and backward over all B x G completions, as TRL's update (its
        # per_device_train_batch_size is the whole batch); our default splits by tokens
        "algo.max_tokens_per_pass=null",
        f"algo.optimizer.lr={s['learning_rate']}",
        f"algo.optimizer.betas=[{s['adam_betas'][0]},{s['adam_betas'][1]}]",
        "algo.optimizer.weight_decay=0.0",
        f"algo.scheduler.name={s['scheduler']}",
        "algo.scheduler.num_warmup_steps=0",
        "algo.samples_every_n_steps=0",
        "callbacks.checkpoint.save_last=false",  # save_top_k is 0: no checkpoint at all
        "save_model=null",
        f"paths.output_root={folder / 'ours'}",
        f"paths.run_dir={folder / 'ours' / 'run'}",
    ]


def learning_overrides(seed: int, steps: int, folder: Path, compiled: bool = False) -> list[str]:
    """Our defaults (task=arithmetic, tiny model, SFT warm start) for `steps` GRPO steps, with
    `model.compile=true` when `compiled`; the warm start and the model folder are the project's
    own caches, the rest goes to `folder`."""
    return [
        *(["model.compile=true"] if compiled else []),
        f"seed={seed}",
        f"trainer.max_steps={steps}",
        f"paths.models_dir={MODELS_DIR}",
        f"sft.cache_dir={REPO / 'outputs' / 'cache' / 'sft'}",
        f"paths.output_root={folder}",
        f"paths.run_dir={folder / 'run'}",
        "save_model=null",
    ]


def use_plain_prompts_and_dense_reward(cfg: DictConfig) -> None:
    """The row's `question` is the prompt as it is, scored by the benchmark's dense reward, and
    the step clock is added to the callbacks."""
    with open_dict(cfg):
        cfg.policy.template = "{question}"
        cfg.policy.use_chat_template = False
        cfg.policy.response_prefix = ""
        cfg.reward = {
            "_target_": "src.reward.combine.CombinedReward",
            "on_error": "raise",
            "functions": {"dense": {"_target_": "vs_trl_common.DenseTextReward"}},
            "weights": {"dense": 1.0},
        }
        cfg.callbacks.step_clock = {"_target_": "vs_trl_ours.StepClock"}


def write_rows(folder: Path, prompts: list[str]) -> None:
    """The prompts as data rows (`question` is the whole prompt), and one held-out row."""
    rows = "".join(json.dumps({"question": p, "answer": "0"}) + "\n" for p in prompts)
    (folder / "train.jsonl").write_text(rows)
    (folder / "val.jsonl").write_text(json.dumps({"question": prompts[0], "answer": "0"}) + "\n")


def role_prompts(cfg: DictConfig, tokenizer: Any) -> list[str]:
    """The prompts our data module and role make of the training rows, in row order."""
    from src.utils.config import build

    datamodule = build(cfg.data)
    datamodule.prepare_rows()
    return build(cfg.policy).prompts(datamodule.train_rows, tokenizer)


def metric_history(cfg: DictConfig, names: list[str]) -> dict[str, list[float]]:
    """Each metric's values by step from the run's MLflow store (one run in it)."""
    import mlflow

    client = mlflow.MlflowClient(tracking_uri=cfg.paths.mlflow_uri)
    experiment = client.get_experiment_by_name(cfg.task_name)
    run = client.search_runs([experiment.experiment_id])[0]
    history = {}
    for name in names:
        points = sorted(client.get_metric_history(run.info.run_id, name), key=lambda m: m.step)
        history[name] = [point.value for point in points]
    return history


# ------------------------------------------------------------------------------------ runs
def run_speed(spec: dict[str, Any]) -> RunResult:
    """One timed run of our training path on the spec's prompts."""
    from transformers import AutoTokenizer

    from src.train import train
    from src.utils.compose import compose_train_config

    shape = SHAPES[spec["shape"]]
    folder, prompts = Path(spec["folder"]), spec["prompts"]
    model_folder, device = Path(spec["model_folder"]), spec.get("device", "cpu")
    write_rows(folder, prompts)
    overrides = speed_overrides(
        shape,
        spec["beta"],
        spec["steps"],
        spec["seed"],
        spec["dtype"],
        folder,
        model_folder,
        device,
    )
    compiled = ["model.compile=true"] if spec.get("compile") else []
    cfg = compose_train_config([*overrides, *compiled, *spec.get("overrides", [])])
    use_plain_prompts_and_dense_reward(cfg)
    tokenizer = AutoTokenizer.from_pretrained(model_folder)
    made = role_prompts(cfg, tokenizer)
    if made != prompts:
        raise RuntimeError("our data module and role do not reproduce the benchmark prompts")
    from src.model.prompt_start import added_bos, prompt_token_ids

    limit = cfg.model.get("max_prompt_length")
    bos = added_bos(tokenizer)
    counts = [len(ids) for ids in prompt_token_ids(tokenizer, made, limit, bos)]  # as encoded
    STEP_ENDS.clear()
    MARKS.clear()
    started = time.perf_counter()
    train(cfg)
    phases = [f"timing/{name}" for name in ("sampling", "reward", "log_probs", "update")]
    history = metric_history(
        cfg, ["completions/mean_length", "reward", "frac_reward_zero_std", *phases]
    )
    from src.model.fast.probe import verdicts
    from src.utils import per_machine

    probes = verdicts()
    return RunResult(
        framework="ours",
        shape=shape.name,
        beta=spec["beta"],
        seed=spec["seed"],
        dtype=spec["dtype"],
        steps=spec["steps"],
        step_ends=list(STEP_ENDS),
        mean_lengths=history["completions/mean_length"],
        rewards=history["reward"],
        frac_reward_zero_std=history["frac_reward_zero_std"],
        prompt_tokens=counts,
        peak_rss_gib=peak_rss_gib(),
        completions_per_step=shape.completions,
        device=device,
        peak_gpu_gib=peak_gpu_gib(),
        started=started,
        details={
            "skip_zero_advantage": bool(cfg.algo.skip_zero_advantage),
            "compiled": bool(cfg.model.get("compile", False)),
            "max_tokens_per_pass": cfg.algo.max_tokens_per_pass,
            "probe_seconds": sum(v.seconds for v in probes),
            "machine_choices": per_machine.choice_lines(),
            # seconds from the call of `train` to each point before the first step ends
            "start_marks": {name: round(at - started, 2) for name, at in MARKS.items()},
            "fast_paths": {v.path: v.proven for v in probes},
            "probe_seconds_by_path": {v.path: round(v.seconds, 3) for v in probes},
            # median seconds of each phase of a step after the first (`timing/<phase>`),
            # and of the rest of the step
            "phase_seconds": phase_seconds(
                step_seconds(STEP_ENDS),
                {
                    name.removeprefix("timing/"): history[name][1:] or history[name]
                    for name in phases
                },
            ),
        },
    )


def warm_start_folder(cfg: DictConfig) -> Path:
    """Where `src.sft.warm_start` caches the warm start of this config."""
    from src.sft.warm_start import cache_key

    return Path(cfg.sft.cache_dir) / f"{cfg.task_name}-{cache_key(cfg)}"


def run_learning(spec: dict[str, Any]) -> dict[str, Any]:
    """Our defaults on the arithmetic task for the spec's steps; reward per step."""
    from src.sft.warm_start import DONE
    from src.train import train
    from src.utils.compose import compose_train_config

    cfg = compose_train_config(
        learning_overrides(
            spec["seed"], spec["steps"], Path(spec["folder"]), bool(spec.get("compile"))
        )
    )
    folder = warm_start_folder(cfg)  # before train(), which points cfg.model at it
    started = time.perf_counter()
    train(cfg)
    seconds = time.perf_counter() - started
    if not (folder / DONE).exists():
        raise RuntimeError(f"the warm start was expected at {folder}")
    history = metric_history(cfg, ["reward", "completions/mean_length"])
    return {
        "framework": "ours",
        "seed": spec["seed"],
        "warm_start": str(folder),
        "rewards": history["reward"],
        "mean_lengths": history["completions/mean_length"],
        "wall_seconds": seconds,
    }
