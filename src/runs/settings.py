"""Settings that cannot work, alone or together, refused before any data or model loads, each
with the config key to change. Every key of the composed config is checked here first (a
stage's own `train` settings right after, by the check its stage names:
`pretraining/stages.py:check_stage_settings`); the pure functions of `src/grpo/` (objective,
advantages, policy losses) and the GRPO module check the arguments they are handed again, for
callers that reach them without a config."""

from __future__ import annotations

import logging
import math
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig, OmegaConf

from src.grpo.policy_losses import settings_read
from src.grpo.settings import AlgoSettings
from src.model.causal_lm import check_model_folders
from src.model.fast.probe import turned_off_names
from src.policy.rewriter import NO_SFT_TARGET
from src.pretraining.folders import stage_folders
from src.runs.read_keys import (
    check_added_keys,
    check_read_keys,
    interpolated_roots,
    target_parameters,
)
from src.runs.schema import (
    MISSING,
    all_settings,
    check_schema,
    declared,
    setting_of,
    value_at,
)
from src.utils.config import plain
from src.utils.errors import ConfigError, MissingFileError
from src.utils.folders import check_writable
from src.utils.per_machine import pin_from_environment

log = logging.getLogger(__name__)
HIGH_KL = 0.5  # above this the KL term tends to hold the policy at its reference


def check_settings(cfg: DictConfig) -> AlgoSettings:
    """Raise `ConfigError` for the first setting that cannot work: of the wrong type, out of
    range or not one of its choices (`schema.SETTINGS`, `AlgoSettings`), then alone or together.
    Returns the algorithm's settings, built here once for the whole run: the checks after it
    read them, never `cfg.algo` again. (A task's `before_grpo` steps check their own settings
    when `runs/parts.py` builds them, next.)"""
    check_required(cfg)
    tables = all_settings(cfg)  # with the task's own
    check_schema(cfg, tables)
    check_read_keys(cfg)
    check_added_keys(
        declared=lambda key: declared(key, tables),
        interpolated=lambda key: key in interpolated_roots(cfg),  # read only for a ++ key
    )
    settings = check_algo_settings(plain(cfg.get("algo")) or {})
    check_model_settings(plain(cfg.get("model")) or {}, stage_folders(cfg))
    check_hardware(cfg, settings)
    check_role_settings(cfg)
    check_policy_overrides(cfg, tables)
    check_trainer_settings(cfg, settings)
    check_output_folders(cfg)
    return settings


def check_required(cfg: DictConfig) -> None:
    """Raise `ConfigError` for a key the chosen configs leave for the command line (`???`, e.g.
    `rewriter_adapter: ???` in a user's experiment file): Hydra would otherwise build the run
    without it, as if it were unset."""
    missing = next(left_open(OmegaConf.to_container(cfg, resolve=False)), None)
    if missing is not None:
        raise ConfigError(
            f"{missing} has no value and this config needs one: add {missing}=VALUE to the "
            "command line"
        )


def left_open(node: Any, key: str = "") -> Iterator[str]:
    """The dotted keys under `node` (an unresolved config as containers) whose value is `???`."""
    if node == "???":
        yield key
    elif isinstance(node, dict):
        for name, value in node.items():
            yield from left_open(value, f"{key}.{name}" if key else str(name))
    elif isinstance(node, list):
        for index, value in enumerate(node):
            yield from left_open(value, f"{key}.{index}")


def check_algo_settings(algo: dict[str, Any]) -> AlgoSettings:
    """GRPO settings (`algo.*`) built and checked: their types and what cannot work
    (`AlgoSettings`), a warning for each policy-loss knob set that the chosen loss does not
    read, and one for a KL weight that tends to hold the policy where it started."""
    settings = AlgoSettings.from_config(algo)
    reads = ", ".join(settings_read(settings.policy_loss)) or "none of them"
    for key in settings.unread():
        log.warning(
            "%s=%s is not read by algo.policy_loss=%s (it reads %s): the run trains as without it",
            key,
            getattr(settings, key.removeprefix("algo.")),
            settings.policy_loss,
            reads,
        )
    if settings.kl_beta > HIGH_KL:
        log.warning(
            "algo.kl_beta=%s is high: above %s the KL term tends to keep the policy where it "
            "started (0.01-0.1 is usual)",
            settings.kl_beta,
            HIGH_KL,
        )
    return settings


def check_model_settings(model: dict[str, Any], stages: set[str] = frozenset()) -> None:
    """Model settings (`model.*`) that cannot work together (each one's type and choices:
    `schema.SETTINGS`); an adapter folder must exist unless it is one of the `stages`'
    folders, which a stage trains before the model loads."""
    if model.get("load_in_4bit") and not (model.get("lora") or model.get("adapter_path")):
        raise ConfigError(
            "model.load_in_4bit=true without LoRA: 4-bit weights cannot be trained; "
            "add the adapter with hardware=[4bit,lora] (or set model.lora)"
        )
    adapter = model.get("adapter_path")
    if (
        adapter
        and str(adapter).startswith(("/", ".", "~"))
        and not Path(adapter).expanduser().is_dir()
        and str(adapter) not in stages
    ):
        raise MissingFileError(
            f"model.adapter_path: no adapter folder at {adapter} (preset=from_sft takes it as "
            "sft_adapter=DIR); point it to a saved LoRA adapter, e.g. a run's model/ folder"
        )


def visible_cuda_devices() -> int:
    """How many CUDA devices this process sees (0 without a CUDA build or driver)."""
    return torch.cuda.device_count() if torch.cuda.is_available() else 0


def check_hardware(cfg: DictConfig, algo: AlgoSettings, cuda_devices: int | None = None) -> None:
    """Devices, strategy and sampler (`trainer.*`, `model.load_in_4bit`, `rollout`) that
    cannot run on this machine, and fast paths turned off by a name none has
    ($GRPO_FAST_PATHS_OFF); the choices $GRPO_MACHINE_CHOICES names are pinned here.
    `cuda_devices` stands in for the visible count in tests."""
    turned_off_names()
    pin_from_environment()  # $GRPO_MACHINE_CHOICES: another run's kernels
    check_hardware_settings(
        Hardware.of(cfg, algo),
        visible_cuda_devices() if cuda_devices is None else cuda_devices,
    )


@dataclass(frozen=True)
class Hardware:
    """The settings that say where and how wide a run goes, read once from the config: the
    trainer's accelerator, devices, nodes and strategy, 4-bit weights, the sampler's target,
    the batch and the sampling rounds."""

    accelerator: str
    devices: Any
    num_nodes: int
    strategy: Any
    load_in_4bit: bool
    rollout_target: str | None
    batch_size: int | None
    sampling_rounds: int = 1

    @classmethod
    def of(cls, cfg: DictConfig, algo: AlgoSettings) -> Hardware:
        trainer = cfg.get("trainer") or {}
        return cls(
            accelerator=str(trainer.get("accelerator", "cpu")),
            devices=plain(trainer.get("devices", 1)),
            num_nodes=int(trainer.get("num_nodes", 1)),
            strategy=plain(trainer.get("strategy")),
            load_in_4bit=bool((cfg.get("model") or {}).get("load_in_4bit")),
            rollout_target=(cfg.get("rollout") or {}).get("_target_"),
            batch_size=(cfg.get("data") or {}).get("batch_size"),
            sampling_rounds=algo.sampling_rounds,
        )


def strategy_kind(strategy: Any) -> str:
    """`ddp`, `fsdp` or the name given, for a Lightning strategy written as a name
    (`ddp`, `ddp_spawn`, `fsdp`, `auto`) or as a config with `_target_` (hardware=multi_gpu)."""
    if isinstance(strategy, dict):
        target = str(strategy.get("_target_", ""))
        for kind, suffix in (("fsdp", "FSDPStrategy"), ("ddp", "DDPStrategy")):
            if target.endswith(suffix):
                return kind
        return target
    name = str(strategy or "auto").lower()
    for kind in ("fsdp", "ddp"):
        if name.startswith(kind):
            return kind
    return name


def devices_per_node(accelerator: str, devices: Any, cuda_devices: int) -> int | None:
    """Processes Lightning starts per node for `trainer.devices` (an int, -1, "auto", a count
    or index list as text, a list of indices); None where it depends on the CPU count."""
    on_gpu = accelerator in ("gpu", "cuda")
    if isinstance(devices, (list, tuple)):
        return len(devices)
    text = str(devices).strip()
    if text in ("-1", "auto"):
        return cuda_devices if on_gpu else (1 if text == "auto" else None)
    if "," in text:
        return len([index for index in text.split(",") if index.strip()])
    return int(text) if text.lstrip("-").isdigit() else None


def check_hardware_settings(hardware: Hardware, cuda_devices: int) -> None:
    """Device settings that cannot work with `cuda_devices` CUDA devices visible: a pure
    function of plain values, so every case is testable on a machine without a GPU."""
    accelerator, devices, num_nodes = hardware.accelerator, hardware.devices, hardware.num_nodes
    rollout_target, sampling_rounds = hardware.rollout_target, hardware.sampling_rounds
    kind = strategy_kind(hardware.strategy)
    if accelerator == "auto":
        accelerator = "gpu" if cuda_devices else "cpu"
    on_gpu = accelerator in ("gpu", "cuda")
    if on_gpu and cuda_devices == 0:
        raise ConfigError(
            f"trainer.accelerator={accelerator} but no CUDA device is visible "
            "(torch.cuda.is_available() is false); use hardware=cpu"
        )
    if rollout_target and str(rollout_target).endswith("VLLMSampler") and not on_gpu:
        where = "no CUDA device is visible" if cuda_devices == 0 else "trainer.accelerator=cpu"
        raise ConfigError(f"rollout=vllm needs a CUDA device but {where}; use rollout=hf")
    if kind == "fsdp" and not on_gpu:
        raise ConfigError(
            f"trainer.strategy=fsdp (hardware=fsdp) with trainer.accelerator={accelerator}: "
            "Lightning runs FSDP only on CUDA devices; on CPU test several processes with "
            "trainer.devices=2 trainer.strategy=ddp"
        )
    if kind == "fsdp" and hardware.load_in_4bit:
        raise ConfigError(
            "trainer.strategy=fsdp (hardware=fsdp) with model.load_in_4bit=true: 4-bit weights "
            "are not sharded here; use hardware=[multi_gpu,4bit,lora] or drop 4bit"
        )
    per_node = devices_per_node(accelerator, devices, cuda_devices)
    if on_gpu and per_node is not None and per_node > cuda_devices:
        raise ConfigError(
            f"trainer.devices={devices} but {cuda_devices} CUDA device(s) found; "
            f"set trainer.devices to at most {cuda_devices} (-1 takes every visible one)"
        )
    if on_gpu and kind in ("ddp", "fsdp") and num_nodes == 1 and cuda_devices < 2:
        raise ConfigError(
            f"trainer.strategy={kind} (hardware=multi_gpu or fsdp) shares the run over several "
            f"GPUs but only {cuda_devices} CUDA device was found; use hardware=gpu"
        )
    processes = None if per_node is None else per_node * num_nodes
    vllm = bool(rollout_target) and str(rollout_target).endswith("VLLMSampler")
    if vllm and (processes is None or processes > 1):
        raise ConfigError(
            f"rollout=vllm runs one engine beside one training process, but trainer.devices="
            f"{devices} x trainer.num_nodes={num_nodes} start several; use rollout=hf with "
            "several processes, or one process (hardware=gpu) with rollout.tensor_parallel_size"
        )
    if sampling_rounds != 1 and (processes is None or processes > 1):
        raise ConfigError(
            f"algo.sampling_rounds={sampling_rounds} (dynamic sampling) runs on one training "
            f"process, but trainer.devices={devices} x trainer.num_nodes={num_nodes} start "
            "several; use one process or algo.sampling_rounds=1"
        )
    batch_size = hardware.batch_size
    if batch_size is not None and processes and int(batch_size) % processes:
        raise ConfigError(
            f"data.batch_size={batch_size} (prompts per step, all processes together) does not "
            f"split over {processes} processes (trainer.devices x trainer.num_nodes); make it a "
            f"multiple of {processes}"
        )


RETRIEVAL_ROLES = ("src.policy.rewriter.Rewriter", "src.policy.reader.Reader")
ORACLE_ROLES = ("src.policy.searcher.Searcher",)  # roles that read a row's `oracle` mark


def check_role_settings(cfg: DictConfig) -> None:
    """Roles that need parts the config lacks: a retriever, or a LoRA adapter whose base serves
    as the frozen planner and generator; and the oracle settings, which only a searcher reads."""
    policy = cfg.get("policy") or {}
    target = policy.get("_target_")
    check_oracle_settings(cfg, str(target))
    reader = policy.get("reader")
    if reader is not None and reader.get("builder") is None:  # a builder writes a missing folder
        check_model_folders(
            str(reader.get("name_or_path")), reader.get("adapter_path"), key="policy.reader"
        )
    if target in RETRIEVAL_ROLES and cfg.get("retrieval") is None:
        raise ConfigError(
            f"policy {target.rsplit('.', 1)[-1].lower()} retrieves documents but no retriever is "
            "configured; add retrieval=bm25 (or minilm, medcpt)"
        )
    if target != "src.policy.rewriter.Rewriter":
        return
    model = cfg.get("model") or {}
    if not (model.get("lora") or model.get("adapter_path")):
        raise ConfigError(
            "policy=rewriter trains a LoRA adapter whose base model (adapter off) is the frozen "
            "planner and generator, but model.lora is null; add hardware=lora (or set model.lora)"
        )
    if (cfg.get("sft") or {}).get("enabled") and not str(policy.get("sft_target") or "").strip():
        raise ConfigError(NO_SFT_TARGET)


def check_policy_overrides(cfg: DictConfig, tables: dict[str, Any]) -> None:
    """`eval.policy_overrides.<head>.<key>`: the policy settings a head is scored with, each a
    key the policy takes and held to `policy.<key>`'s declaration, as the policy's own are
    (else a wrong one would fail only when src.eval builds that head, after the models load)."""
    overrides = value_at(cfg, "eval.policy_overrides")
    overrides = overrides if isinstance(overrides, dict) else {}  # MISSING or null: none
    target = str((cfg.get("policy") or {}).get("_target_", ""))
    parameters = target_parameters(target) if target else None
    for head, keys in overrides.items():
        for key, value in (keys or {}).items():
            named = f"eval.policy_overrides.{head}.{key}"
            if parameters is not None and key not in parameters:
                raise ConfigError(
                    f"{named}: {key} is not a setting of the policy "
                    f"({target.rsplit('.', 1)[-1]}); its settings: {', '.join(sorted(parameters))}"
                )
            setting = setting_of(f"policy.{key}", tables)
            if setting is not None and not setting.accepts(value):
                raise ConfigError(f"{named} must be {setting.allowed()}, got {value!r}")


def check_oracle_settings(cfg: DictConfig, target: str) -> None:
    """`eval.oracle` and `data.oracle_share` mark rows whose searches read the gold passage; a
    role that does not search would ignore the mark and the run record it as used."""
    if target in ORACLE_ROLES:
        return
    role = target.rsplit(".", 1)[-1]
    if value_at(cfg, "eval.oracle") is True:
        raise ConfigError(
            f"eval.oracle=true marks rows whose searches read the gold passage, which only "
            f"policy=searcher does; this run's role is {role}: remove eval.oracle"
        )
    share = value_at(cfg, "data.oracle_share")
    if isinstance(share, int | float) and share > 0:
        raise ConfigError(
            f"data.oracle_share={share} marks training rows whose searches read the gold "
            f"passage, which only policy=searcher does; this run's role is {role}: set it to 0"
        )


def check_trainer_settings(cfg: DictConfig, algo: AlgoSettings) -> None:
    """Run-length and checkpoint intervals that cannot work together (each one's type and
    range: `schema.SETTINGS`)."""
    trainer = cfg.get("trainer") or {}
    if trainer.get("max_steps", 1) is None and cfg.get("epochs") is None:
        raise ConfigError(
            "trainer.max_steps is null and epochs is not set: give the run length as "
            "trainer.max_steps=N or epochs=N"
        )
    check_epochs_given(cfg, command_line_keys())
    every = ((plain(cfg.get("callbacks")) or {}).get("checkpoint") or {}).get("every_n_train_steps")
    iterations = algo.num_iterations
    if every and int(every) % iterations:
        raise ConfigError(
            f"callbacks.checkpoint.every_n_train_steps={every} is not a multiple of "
            f"algo.num_iterations={iterations}: a rollout's updates end on multiples of "
            f"{iterations}, so checkpoints would come only every {math.lcm(int(every), iterations)} steps"
        )


def command_line_keys() -> set[str]:
    """The keys this run's command line sets (`+`/`++`/`~` aside); none outside a Hydra job."""
    if not HydraConfig.initialized():
        return set()
    overrides = HydraConfig.get().overrides.task
    return {str(override).split("=", 1)[0].lstrip("+~") for override in overrides}


def check_epochs_given(cfg: DictConfig, given: set[str]) -> None:
    """`epochs=N` typed on the command line while the task or preset fixes the steps would be
    ignored (the steps win): refused, with how to run by epochs. A preset's own epochs, and
    steps given beside them on the command line, are the documented cases and pass."""
    epochs, steps = cfg.get("epochs"), (cfg.get("trainer") or {}).get("max_steps")
    if "epochs" in given and "trainer.max_steps" not in given and epochs and steps is not None:
        raise ConfigError(
            f"epochs={epochs} is not used while trainer.max_steps={steps} is set by the task or "
            f"preset: add trainer.max_steps=null to train for {epochs} epochs (or give the steps)"
        )


def check_output_folders(cfg: DictConfig) -> None:
    """Folders a run writes, at its end (the saved model), on the way (its run folder's
    checkpoints, the warm-start cache) or for later runs (caches, converted models), must be
    writable now, before any work, not after hours of training."""
    keys = ["paths.run_dir", "paths.cache_dir", "paths.models_dir", "save_model"]
    if (cfg.get("sft") or {}).get("enabled"):
        keys.append("sft.cache_dir")
    for key in keys:
        folder = value_at(cfg, key)  # MISSING: unset, or resolved only inside a Hydra job
        if folder and folder is not MISSING:
            check_writable(Path(str(folder)), key)
