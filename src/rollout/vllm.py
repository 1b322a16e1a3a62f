"""Sampling with vLLM: the GPU rollout backend (`rollout=vllm`), colocated with training.

The engine runs in the training process on the same GPU, created on the first `sample` from
the trained network's base model folder, and sees the weights being trained in one of two ways:

- LoRA: after `sync`, the next `sample` saves the current adapter (never merged into the base,
  so a 4-bit base stays exactly the weights trained on) and asks for it through a new
  `LoRARequest`, one fresh id per pushed adapter.
- full fine-tuning: after `sync`, the next `sample` loads the network's state dict into the
  engine's model (`model.load_weights`, names as in the HF model) and drops the prefix cache.

The push waits for the next `sample`, so several optimizer steps between two rollouts cost one
push; a sum over the trainable weights catches a change no `sync` announced. Completions come
back as token ids with vLLM's log-prob of each sampled token after temperature
(`logprobs_mode="processed_logprobs"`) and are laid out exactly as `HFSampler` lays them out;
the pure functions below do that part and run without vLLM.

vLLM is imported only here, inside functions: it needs a CUDA GPU and `pip install .[gpu]`.
"""

from __future__ import annotations

import functools
import importlib.util
import itertools
import logging
import os
import shutil
import tempfile
import weakref
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

import torch
from torch import Tensor, nn

from src.model.network import DecodedNetwork
from src.model.steps import unpadded_prompts
from src.rollout.engine_settings import EngineSettings
from src.rollout.rollout import Rollout, pad_rows
from src.rollout.sampling_settings import SamplingSettings
from src.utils.distributed import is_distributed
from src.utils.errors import ConfigError

log = logging.getLogger(__name__)

# Adapter ranks a vLLM engine can be sized for (`max_lora_rank` takes one of these).
LORA_RANK_SLOTS = (8, 16, 32, 64, 128, 256, 320, 512)


def check_vllm_usable() -> None:
    """Refuse `rollout=vllm`, in one line, where it cannot run: no CUDA device, or no vLLM.

    Called when the sampler is built, before any data or model loads."""
    if not torch.cuda.is_available():
        raise ConfigError(
            "rollout=vllm needs a CUDA GPU and torch sees none; use rollout=hf on this machine"
        )
    if importlib.util.find_spec("vllm") is None:
        raise ConfigError(vllm_missing_message())


def vllm_missing_message(reason: str = "vLLM is not installed") -> str:
    """The one-line message for a vLLM that cannot be imported."""
    return (
        f"rollout=vllm: {reason}; it needs a CUDA GPU and `pip install .[gpu]` (or use rollout=hf)"
    )


def import_vllm() -> Any:
    """The `vllm` module, imported on first use; a failed import is a one-line `ConfigError`."""
    try:
        import vllm
    except ImportError as error:
        raise ConfigError(vllm_missing_message(f"vLLM could not be imported ({error})")) from error
    return vllm


def base_model(network: nn.Module) -> nn.Module:
    """The transformers model under a peft wrapper, or the network itself."""
    return network.get_base_model() if hasattr(network, "get_base_model") else network


def base_model_path(network: nn.Module) -> str:
    """The folder or hub name the network's base weights were loaded from: what the engine
    loads before any adapter or weights are pushed to it."""
    base = base_model(network)
    path = getattr(base, "name_or_path", None) or getattr(base.config, "_name_or_path", None)
    if not path:
        raise ConfigError(
            "rollout=vllm: the model does not say which folder it was loaded from "
            "(config._name_or_path); load it with `from_pretrained`"
        )
    return str(path)


def loaded_in_4bit(network: nn.Module) -> bool:
    """Whether the base weights are bitsandbytes 4-bit, so the engine quantizes its copy too."""
    base = base_model(network)
    if getattr(base, "is_loaded_in_4bit", False):
        return True
    quantization = getattr(base.config, "quantization_config", None)
    if isinstance(quantization, dict):
        return bool(quantization.get("load_in_4bit", False))
    return bool(getattr(quantization, "load_in_4bit", False))


def adapter_enabled(network: nn.Module) -> bool:
    """Whether a LoRA adapter is on: False for a plain network and inside
    `adapter_disabled()` (the frozen base the rewriter's planner samples)."""
    if not hasattr(network, "disable_adapter"):
        return False
    from peft.tuners.tuners_utils import BaseTunerLayer

    for module in network.modules():
        if isinstance(module, BaseTunerLayer):
            return not module.disable_adapters
    return False


def adapter_rank(network: nn.Module) -> int:
    """The largest rank of the network's active LoRA adapter (its `r` or any `rank_pattern`)."""
    config = network.peft_config[network.active_adapter]
    return max([int(config.r), *(int(r) for r in (config.rank_pattern or {}).values())])


def lora_rank_slot(rank: int) -> int:
    """The smallest rank vLLM can size its LoRA buffers for that holds an adapter of `rank`."""
    for slot in LORA_RANK_SLOTS:
        if rank <= slot:
            return slot
    raise ConfigError(
        f"rollout=vllm: LoRA rank {rank} is above the largest vLLM serves ({LORA_RANK_SLOTS[-1]}); "
        "lower model.lora.r"
    )


def engine_max_model_len(
    max_model_len: int | None, max_prompt_length: int | None, max_completion_length: int
) -> int | None:
    """The engine's context length: as configured, else the prompt budget plus the completion
    budget (a smaller KV cache per sequence, so more sequences fit), else the model's own."""
    if max_model_len is not None:
        return max_model_len
    if max_prompt_length is not None:
        return max_prompt_length + max_completion_length
    return None


def sampled_logps(token_ids: Sequence[int], steps: Sequence[dict[int, Any]] | None) -> list[float]:
    """The log-prob of each sampled token, read from vLLM's per-step `{token id: Logprob}`."""
    if steps is None:
        raise RuntimeError("vLLM returned no log-probs; the request must set `logprobs=0`")
    return [float(step[token].logprob) for token, step in zip(token_ids, steps, strict=True)]


def completion_rows(
    outputs: Iterable[Any], copies: int = 1
) -> tuple[list[list[int]], list[list[float]]]:
    """Token ids and sampled-token log-probs of every completion of vLLM's `RequestOutput`s, in
    row order: request i's completions (by their index) at rows i*G .. i*G+G-1. `copies`
    repeats each completion (greedy decoding asks once per prompt and fills the group)."""
    tokens: list[list[int]] = []
    logps: list[list[float]] = []
    for output in outputs:
        for completion in sorted(output.outputs, key=lambda c: c.index):
            ids = list(completion.token_ids)
            values = sampled_logps(ids, completion.logprobs)
            tokens += [ids] * copies
            logps += [values] * copies
    return tokens, logps


def first_eos_lengths(rows: Sequence[Sequence[int]], eos_token_ids: Sequence[int]) -> list[int]:
    """Counted tokens per row: up to and including the first EOS, else the whole row."""
    eos = set(eos_token_ids)
    lengths = []
    for row in rows:
        ends = [i for i, token in enumerate(row) if token in eos]
        lengths.append(ends[0] + 1 if ends else len(row))
    return lengths


def build_rollout(
    prompt_ids: Tensor,
    prompt_mask: Tensor,
    completions: Sequence[Sequence[int]],
    logps: Sequence[Sequence[float]] | None,
    eos_token_ids: Sequence[int],
    tokenizer: Any,
) -> Rollout:
    """The `Rollout` of sampled token lists, in `HFSampler`'s layout: completion ids cut after
    the first EOS and right-padded with the pad id, the mask 1 up to and including that EOS,
    `is_clipped` where none came, texts decoded without special tokens; the log-probs padded
    with 0. The mask comes from the lists, not the padded ids, so a pad id equal to EOS (a
    tokenizer without a pad token) cannot end a completion that never ended."""
    lengths = first_eos_lengths(completions, eos_token_ids)
    rows = [list(row)[:length] for row, length in zip(completions, lengths, strict=True)]
    width = max([1, *lengths])
    ids = pad_rows(rows, width, tokenizer.pad_token_id, torch.long)
    mask = pad_rows([[1] * length for length in lengths], width, 0, torch.long)
    eos = set(eos_token_ids)
    clipped = torch.tensor([not (set(row) & eos) for row in rows], dtype=torch.bool)
    sampler_logps = None
    if logps is not None:
        cut = [list(values)[:length] for values, length in zip(logps, lengths, strict=True)]
        sampler_logps = pad_rows(cut, width, 0.0, torch.float32)
    device = prompt_ids.device
    return Rollout(
        prompt_ids=prompt_ids,
        prompt_mask=prompt_mask,
        completion_ids=ids.to(device),
        completion_mask=mask.to(device),
        is_clipped=clipped.to(device),
        completions=tokenizer.batch_decode(ids, skip_special_tokens=True),
        sampler_logps=None if sampler_logps is None else sampler_logps.to(device),
    )


def weights_fingerprint(network: nn.Module) -> Tensor:
    """The sum of every trainable tensor, on the CPU: changes when an optimizer step changes
    the weights, at the cost of one read of them (no copy)."""
    with torch.no_grad():
        sums = [p.sum(dtype=torch.float32) for p in network.parameters() if p.requires_grad]
        return torch.stack(sums).cpu() if sums else torch.zeros(0)


def load_state(model: nn.Module, weights: list[tuple[str, Tensor]]) -> None:
    """Copy HF-named weights into a vLLM model (run inside the engine's worker)."""
    model.load_weights(weights)


class VLLMSampler:
    """A `Sampler` for transformers causal LMs that generates with a colocated vLLM engine:
    G completions per prompt, in `HFSampler`'s layout, with vLLM's own log-probs of the sampled
    tokens (`Rollout.sampler_logps`)."""

    @classmethod
    def more_keys(cls) -> set[str]:
        """The `rollout.*` keys its settings objects read (`SamplingSettings`, `EngineSettings`;
        the settings check's `runs/read_keys.py`)."""
        return SamplingSettings.more_keys() | EngineSettings.more_keys()

    def __init__(self, **keys: Any) -> None:
        """`keys`: the config's `rollout.*` keys: the sampling ones, `HFSampler`'s, read once
        into `self.sampling` (`SamplingSettings`), the others into `self.engine`
        (`EngineSettings`), each checked there."""
        self.sampling = SamplingSettings.taken_from(keys)
        if self.sampling.stop_strings:
            raise ConfigError(
                "rollout.stop_strings is served by rollout=hf only (the engine returns token "
                "ids without their text); use rollout=hf or set rollout.stop_strings=null"
            )
        self.engine = EngineSettings.of(keys, "rollout=vllm")
        check_vllm_usable()
        self.max_completion_length = self.sampling.max_completion_length
        self.temperature = self.sampling.temperature
        self.llm: Any = None  # the vLLM engine, made by the first `sample`
        self._engine_model: str | None = None  # the base it was made from
        self._engine_lora = False  # whether it serves LoRA adapters
        self._lora_request: Any = None  # the adapter following samples use
        self._lora_ids = itertools.count(1)  # vLLM adapter ids: fresh for every push
        self._adapter_root: tempfile.TemporaryDirectory | None = None
        self._pushed: weakref.ref | None = None  # the network whose weights the engine holds
        self._stale = True  # the network changed since its weights were pushed
        self._fingerprint = torch.zeros(0)  # `weights_fingerprint` of the pushed weights
        self._asleep = False  # the engine's memory is released (sleep_between_rollouts)

    def sync(self, lm: DecodedNetwork) -> None:
        """Note that the network's weights changed (an optimizer step): the next `sample`
        pushes them (the adapter, or the whole state dict) to the engine first."""
        self._stale = True

    @torch.no_grad()
    def sample(
        self, lm: DecodedNetwork, prompts: list[str], group_size: int, greedy: bool = False
    ) -> Rollout:
        """G completions for each prompt from the network's current weights (rows i*G ..
        i*G+G-1); greedy decoding for evaluation, one answer per prompt filling its group.
        Log-probs are at the sampling temperature (at 1 under greedy decoding)."""
        encoded = lm.encode_prompts(prompts)
        prompt_ids, prompt_mask = encoded["input_ids"], encoded["attention_mask"]
        llm = self._engine(lm)
        if self._asleep:
            llm.wake_up()
            self._asleep = False
        try:
            self._push_if_stale(lm)
            use_adapter = lm.uses_lora and adapter_enabled(lm.network)
            outputs = llm.generate(
                [{"prompt_token_ids": ids} for ids in unpadded_prompts(prompt_ids, prompt_mask)],
                self._sampling_params(lm, 1 if greedy else group_size, greedy),
                use_tqdm=False,
                lora_request=self._lora_request if use_adapter else None,
            )
        finally:
            if (
                self.engine.sleep_between_rollouts
            ):  # weights to CPU, KV cache freed, until next time
                llm.sleep(level=1)
                self._asleep = True
        tokens, logps = completion_rows(outputs, copies=group_size if greedy else 1)
        return build_rollout(
            prompt_ids.repeat_interleave(group_size, dim=0),
            prompt_mask.repeat_interleave(group_size, dim=0),
            tokens,
            logps,
            lm.eos_token_ids,
            lm.tokenizer,
        )

    def _sampling_params(self, lm: DecodedNetwork, n: int, greedy: bool) -> Any:
        """vLLM's `SamplingParams`: this sampler's settings (greedy: temperature 0), stopping
        at any of the network's EOS ids, with the sampled token's log-prob (`logprobs=0`)."""
        vllm = import_vllm()
        settings: dict[str, Any] = (
            {"temperature": 0.0}
            if greedy
            else {
                "temperature": self.temperature,
                "top_p": self.sampling.top_p,
                "top_k": self.sampling.top_k
                if self.sampling.top_k > 0
                else -1,  # -1: all tokens, in every version
                "repetition_penalty": self.sampling.repetition_penalty,
            }
        )
        return vllm.SamplingParams(
            n=n,
            max_tokens=self.max_completion_length,
            min_tokens=0 if greedy else self.sampling.min_completion_length,
            stop_token_ids=list(lm.eos_token_ids),
            logprobs=0,
            detokenize=False,  # the texts are decoded with the network's tokenizer
            **settings,
        )

    def _engine(self, lm: DecodedNetwork) -> Any:
        """The engine, made on first use from the network's base model: LoRA-enabled when the
        network trains an adapter, quantized to 4 bits in flight when its base is."""
        path = base_model_path(lm.network)
        if self.llm is not None:
            if lm.uses_lora != self._engine_lora or (lm.uses_lora and path != self._engine_model):
                served = f"{self._engine_model} ({'with' if self._engine_lora else 'without'} LoRA)"
                asked = f"{path} ({'with' if lm.uses_lora else 'without'} LoRA)"
                raise ConfigError(
                    f"rollout=vllm: the engine serves {served} and cannot sample {asked}; "
                    "one sampler serves one base model"
                )
            return self.llm
        if is_distributed():
            raise ConfigError(
                "rollout=vllm runs one engine inside one training process; "
                "with several processes use rollout=hf"
            )
        four_bit = loaded_in_4bit(lm.network)
        if four_bit and not lm.uses_lora:
            raise ConfigError(
                "rollout=vllm: a 4-bit base model is trained through a LoRA adapter; "
                "add hardware=lora"
            )
        vllm = import_vllm()
        # The engine core and its worker stay in this process, so pushed weights are not copied
        # between processes (read by vLLM when the engine is made).
        os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
        settings: dict[str, Any] = {
            "model": path,
            "dtype": self.engine.dtype,
            "seed": self.engine.seed,
            "gpu_memory_utilization": self.engine.gpu_memory_utilization,
            "tensor_parallel_size": self.engine.tensor_parallel_size,
            "max_model_len": engine_max_model_len(
                self.engine.max_model_len, lm.max_prompt_length, self.max_completion_length
            ),
            "enable_prefix_caching": self.engine.enable_prefix_caching,
            "enforce_eager": self.engine.enforce_eager,
            "enable_sleep_mode": self.engine.sleep_between_rollouts,
            "logprobs_mode": "processed_logprobs",  # after temperature: what the loss compares
        }
        if lm.uses_lora:
            rank = self.engine.max_lora_rank or lora_rank_slot(adapter_rank(lm.network))
            settings.update(enable_lora=True, max_lora_rank=rank, max_loras=1)
        if four_bit:
            settings.update(quantization="bitsandbytes", load_format="bitsandbytes")
        log.info("Starting the vLLM engine: %s", settings)
        self.llm = vllm.LLM(**settings)
        self._engine_model, self._engine_lora = path, lm.uses_lora
        return self.llm

    def _push_if_stale(self, lm: DecodedNetwork) -> None:
        """Give the engine the network's current weights if they changed since the last push:
        after a `sync`, for another network (the one GRPO starts from after SFT), or when
        their fingerprint moved without a `sync` (a caller that skipped it)."""
        pushed = self._pushed() if self._pushed is not None else None
        if not self._stale and pushed is lm.network:
            if torch.equal(weights_fingerprint(lm.network), self._fingerprint):
                return
            log.warning(
                "rollout=vllm: the weights changed without Sampler.sync(); pushing them now"
            )
        if lm.uses_lora:
            self._push_adapter(lm)
        else:
            self._push_weights(lm)
        self._pushed = weakref.ref(lm.network)
        self._fingerprint = weights_fingerprint(lm.network)
        self._stale = False

    def _push_adapter(self, lm: DecodedNetwork) -> None:
        """Save the current adapter into a folder of its own and name it in a new request."""
        vllm_lora = importlib.import_module("vllm.lora.request")
        if self._adapter_root is None:
            self._adapter_root = tempfile.TemporaryDirectory(prefix="vllm-adapter-")
        lora_id = next(self._lora_ids)
        folder = lm.save(Path(self._adapter_root.name) / f"adapter-{lora_id}", merge=False)
        previous = self._lora_request
        self._lora_request = vllm_lora.LoRARequest(
            lora_name=f"policy-{lora_id}", lora_int_id=lora_id, lora_path=str(folder)
        )
        if previous is not None:  # never asked for again: its id is retired
            shutil.rmtree(previous.lora_path, ignore_errors=True)

    def _push_weights(self, lm: DecodedNetwork) -> None:
        """Load the whole state dict into the engine's model and drop its prefix cache (keys
        and values computed with the old weights)."""
        weights = [(name, tensor.detach()) for name, tensor in lm.network.state_dict().items()]
        load: Callable[[nn.Module], None] = functools.partial(load_state, weights=weights)
        self.llm.apply_model(load)
        self.llm.reset_prefix_cache()
