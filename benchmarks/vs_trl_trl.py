"""TRL's side of `benchmarks/vs_trl.py`: one run of TRL's `GRPOTrainer` in this process, timed
by a `TrainerCallback` at the end of every step, its figures read from the log history, and
its step split into phases by `PhaseClock`."""

from __future__ import annotations

import functools
import importlib.util
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from vs_trl_common import (
    LORA_TARGETS,
    SHAPES,
    TRAIN_SETTINGS,
    RunResult,
    peak_gpu_gib,
    peak_rss_gib,
    phase_seconds,
    step_seconds,
    trl_dense_reward,
)

MISSING_TRL = "TRL is not installed: pip install .[bench]  (or pip install 'trl>=1.16')"


def require_trl() -> None:
    """Fail with the install command when TRL is missing."""
    if importlib.util.find_spec("trl") is None:
        raise SystemExit(MISSING_TRL)


def step_clock(ends: list[float]) -> Any:
    """A TrainerCallback that appends the time at the end of every optimizer step to `ends`
    (called before the Trainer logs that step, so each interval holds one step's logging)."""
    from transformers import TrainerCallback

    class StepClock(TrainerCallback):
        def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            ends.append(time.perf_counter())

    return StepClock()


class PhaseClock:
    """The spans of a TRL step's phases, timed around what the trainer calls: the model's
    `generate` (sampling), the reward function (reward), the trainer's per-token log-prob
    forwards (log_probs: the reference's and the trained forward, as ours' log_probs phase)
    and the accelerator's `backward` (ours' update adds the clipping and the optimizer step,
    which TRL's `rest` holds)."""

    PHASES = ("sampling", "reward", "log_probs", "backward")

    def __init__(self) -> None:
        self.spans: list[tuple[str, float, float]] = []  # (phase, start, end)

    def timed(self, phase: str, function: Callable[..., Any]) -> Callable[..., Any]:
        """`function`, its calls recorded as spans of `phase`."""

        @functools.wraps(function)
        def call(*args: Any, **kwargs: Any) -> Any:
            start = time.perf_counter()
            try:
                return function(*args, **kwargs)
            finally:
                self.spans.append((phase, start, time.perf_counter()))

        return call

    def attach(self, trainer: Any) -> bool:
        """Time `trainer`'s phases; False (nothing timed) where this TRL release lacks one of
        the methods wrapped."""
        forwards = getattr(trainer, "_get_per_token_logps_and_entropies", None)
        if forwards is None or not hasattr(trainer.model, "generate"):
            return False
        trainer.model.generate = self.timed("sampling", trainer.model.generate)
        trainer._get_per_token_logps_and_entropies = self.timed("log_probs", forwards)
        trainer.accelerator.backward = self.timed("backward", trainer.accelerator.backward)
        return True

    def per_step(self, ends: list[float]) -> dict[str, list[float]]:
        """Each phase's seconds within each step after the first: the spans that start after
        one step's end and by the next."""
        steps = list(zip(ends, ends[1:], strict=False))
        return {
            phase: [
                sum(
                    end - start
                    for name, start, end in self.spans
                    if name == phase and earlier < start <= later
                )
                for earlier, later in steps
            ]
            for phase in self.PHASES
        }


def history_of(log_history: list[dict[str, Any]], name: str) -> list[float]:
    """A training metric's values by step from `Trainer.state.log_history`."""
    entries = [entry for entry in log_history if name in entry and "step" in entry]
    return [float(entry[name]) for entry in sorted(entries, key=lambda e: e["step"])]


def grpo_config(folder: Path, use_cpu: bool = True, bf16: bool = False, **settings: Any) -> Any:
    """A GRPOConfig for one process (the CPU in fp32, or with `bf16` under accelerate's
    bfloat16 autocast; one GPU with the weights as loaded), with nothing saved or reported,
    one update per rollout of `per_device_train_batch_size` completions, and logging every
    step."""
    from trl import GRPOConfig

    return GRPOConfig(
        output_dir=str(folder),
        use_cpu=use_cpu,
        report_to="none",
        save_strategy="no",
        logging_steps=1,
        bf16=bf16,
        fp16=False,
        gradient_checkpointing=False,  # TRL's default is True; our models run without it
        gradient_accumulation_steps=1,
        steps_per_generation=1,
        optim="adamw_torch",  # torch.optim.AdamW, as ours (TRL's default is the fused variant)
        dataloader_num_workers=0,
        **settings,
    )


# ------------------------------------------------------------------------------------ speed
def run_speed(spec: dict[str, Any]) -> RunResult:
    """One timed run of TRL's GRPOTrainer on the spec's prompts."""
    require_trl()
    import torch
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import GRPOTrainer

    shape = SHAPES[spec["shape"]]
    prompts, steps, s = spec["prompts"], spec["steps"], TRAIN_SETTINGS
    folder, device = Path(spec["model_folder"]), spec.get("device", "cpu")
    started = time.perf_counter()  # loading counts, as in ours (`train` loads the model)
    dtype = getattr(torch, spec.get("dtype", "float32")) if device == "cuda" else torch.float32
    tokenizer = AutoTokenizer.from_pretrained(folder)
    model = AutoModelForCausalLM.from_pretrained(folder, dtype=dtype)
    peft_config = None
    if shape.lora:
        from peft import LoraConfig

        peft_config = LoraConfig(
            task_type="CAUSAL_LM",
            r=16,
            lora_alpha=32,
            lora_dropout=0.0,
            target_modules=LORA_TARGETS,
        )
    args = grpo_config(
        Path(spec["folder"]) / "trl",
        use_cpu=device == "cpu",
        bf16=device == "cpu" and spec.get("dtype") == "bfloat16",  # autocast, as TRL runs
        max_steps=steps,
        seed=spec["seed"],
        per_device_train_batch_size=shape.completions,
        num_generations=shape.group,
        max_completion_length=shape.tokens,
        generation_kwargs={"min_new_tokens": shape.tokens},
        temperature=s["temperature"],
        top_p=s["top_p"],
        top_k=s["top_k"],
        loss_type=s["loss_type"],
        scale_rewards=s["scale_rewards"],
        beta=spec["beta"],
        num_iterations=s["num_iterations"],
        learning_rate=s["learning_rate"],
        adam_beta1=s["adam_betas"][0],
        adam_beta2=s["adam_betas"][1],
        weight_decay=0.0,
        max_grad_norm=s["max_grad_norm"],
        lr_scheduler_type=s["scheduler"],
        warmup_steps=0,
        shuffle_dataset=False,  # B prompts repeated: every step takes exactly the B prompts
        torch_compile=bool(spec.get("compile")),  # the model through torch.compile (--compile)
    )
    ends: list[float] = []
    clock = PhaseClock()
    trainer = GRPOTrainer(
        model=model,
        reward_funcs=clock.timed("reward", trl_dense_reward),
        args=args,
        train_dataset=Dataset.from_dict({"prompt": prompts * steps}),
        processing_class=tokenizer,
        peft_config=peft_config,
        callbacks=[step_clock(ends)],
    )
    counts = [len(ids) for ids in tokenizer(text=prompts)["input_ids"]]  # as _tokenize_prompts
    if device == "cuda":  # peft makes the LoRA weights in fp32: back to the model's dtype
        for parameter in trainer.model.parameters():
            if parameter.is_floating_point() and parameter.dtype != dtype:
                parameter.data = parameter.data.to(dtype)
    # on a GPU the calls return before the device finishes: phases are timed on the CPU only
    timed = device == "cpu" and clock.attach(trainer)
    trainer.train()
    log = trainer.state.log_history
    return RunResult(
        framework="trl",
        shape=shape.name,
        beta=spec["beta"],
        seed=spec["seed"],
        dtype=spec.get("dtype", "float32") if args.bf16 else str(dtype).removeprefix("torch."),
        steps=steps,
        step_ends=ends,
        mean_lengths=history_of(log, "completions/mean_length"),
        rewards=history_of(log, "reward"),
        frac_reward_zero_std=history_of(log, "frac_reward_zero_std"),
        prompt_tokens=counts,
        peak_rss_gib=peak_rss_gib(),
        completions_per_step=shape.completions,
        device=device,
        peak_gpu_gib=peak_gpu_gib(),
        started=started,
        details={
            "compiled": bool(spec.get("compile")),
            # median seconds of each phase of a step after the first, and of the rest
            **(
                {"phase_seconds": phase_seconds(step_seconds(ends), clock.per_step(ends))}
                if timed
                else {}
            ),
        },
    )


# ------------------------------------------------------------------------------------ learning
def ordered_rows(cfg: Any) -> list[dict[str, Any]]:
    """Our training rows in the order our run draws them: batch after batch, as
    `PromptDataModule.train_dataloader` yields them for `data.num_batches` steps."""
    from src.utils.config import build

    datamodule = build(cfg.data)
    datamodule.prepare_rows()
    datamodule.drop_rows_without(build(cfg.reward).required_fields())
    return [row for batch in datamodule.train_dataloader() for row in batch]


def accuracy_reward(cfg: Any) -> Any:
    """Our configured reward (`cfg.reward`) over what our role makes of each completion, as a
    TRL reward function; the rows travel in the dataset column `row` as JSON."""
    from src.utils.config import build

    policy, reward = build(cfg.policy), build(cfg.reward)

    def reward_of_our_role(completions: list[str], row: list[str], **kwargs: Any) -> list[float]:
        rows = [json.loads(text) for text in row]
        outcomes = policy.outcomes(completions, rows).texts
        return reward(outcomes, rows).total.tolist()

    return reward_of_our_role


def learning_settings(cfg: Any) -> dict[str, Any]:
    """GRPOConfig settings as our composed config resolves them."""
    algo, rollout = cfg.algo, cfg.rollout
    unsupported = {
        "algo.top_k_ratio": (algo.top_k_ratio, 1.0),
        "algo.sampler_is_cap": (algo.sampler_is_cap, None),
        "algo.ref_model_path": (algo.ref_model_path, None),
    }
    for key, (value, neutral) in unsupported.items():
        if value != neutral:
            raise SystemExit(f"{key}={value} has no TRL counterpart here; use {neutral}")
    generation = {}
    if rollout.min_completion_length:  # 0 in the task: completions end when they will
        generation["min_new_tokens"] = rollout.min_completion_length
    return {
        "max_steps": cfg.trainer.max_steps,
        "seed": cfg.seed,
        "per_device_train_batch_size": cfg.data.batch_size * algo.group_size,
        "num_generations": algo.group_size,
        "max_completion_length": algo.max_completion_length,
        "generation_kwargs": generation or None,
        "repetition_penalty": rollout.repetition_penalty,
        "temperature": rollout.temperature,
        "top_p": rollout.top_p,
        "top_k": rollout.top_k,
        "loss_type": algo.loss_type,
        "scale_rewards": algo.scale_rewards,
        "beta": algo.kl_beta,
        "epsilon": algo.epsilon_low,
        "epsilon_high": algo.epsilon_high,
        "num_iterations": algo.num_iterations,
        "learning_rate": algo.optimizer.lr,
        "adam_beta1": algo.optimizer.betas[0],
        "adam_beta2": algo.optimizer.betas[1],
        "weight_decay": algo.optimizer.weight_decay,
        "max_grad_norm": algo.max_grad_norm or 0.0,
        "lr_scheduler_type": algo.scheduler.name,
        "warmup_steps": algo.scheduler.num_warmup_steps,
        "shuffle_dataset": False,  # the rows come in our run's order already
    }


def run_learning(spec: dict[str, Any]) -> dict[str, Any]:
    """TRL's GRPOTrainer from the warm start our run of the same config cached, on our rows,
    prompts and reward, with our config's settings; reward per step."""
    require_trl()
    from datasets import Dataset
    from trl import GRPOTrainer
    from vs_trl_ours import learning_overrides, warm_start_folder

    from src.model.saved import saved_model_settings
    from src.utils.compose import compose_train_config
    from src.utils.config import build

    folder = Path(spec["folder"])
    compiled = bool(spec.get("compile"))
    cfg = compose_train_config(learning_overrides(spec["seed"], spec["steps"], folder, compiled))
    warm = warm_start_folder(cfg)
    if not (warm / "warm_start.json").exists():
        raise SystemExit(f"no warm start at {warm}: run ours first (it caches it)")
    lm = build(cfg.model, **saved_model_settings(warm))  # loaded exactly as our run loads it
    rows = ordered_rows(cfg)
    prompts = build(cfg.policy).prompts(rows, lm.tokenizer)
    dataset = Dataset.from_dict(
        {"prompt": prompts, "row": [json.dumps(row, default=str) for row in rows]}
    )
    settings = learning_settings(cfg)
    trainer = GRPOTrainer(
        model=lm.network,
        reward_funcs=accuracy_reward(cfg),
        args=grpo_config(folder / "trl", torch_compile=compiled, **settings),
        train_dataset=dataset,
        processing_class=lm.tokenizer,
    )
    started = time.perf_counter()
    trainer.train()
    seconds = time.perf_counter() - started
    log = trainer.state.log_history
    return {
        "framework": "trl",
        "seed": spec["seed"],
        "warm_start": str(warm),
        "rewards": history_of(log, "reward"),
        "mean_lengths": history_of(log, "completions/mean_length"),
        "wall_seconds": seconds,
        "settings": {key: str(value) for key, value in settings.items()},
    }
