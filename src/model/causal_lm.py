"""Hugging Face causal language models: loading (LoRA, 4-bit) and per-token log-probs.

Every model, from the built-in tiny Llama to a 9B checkpoint, is loaded by `load_causal_lm`
and hidden behind `CausalLM`, so the GRPO and SFT modules never see model-specific code.
"""

from __future__ import annotations

import contextlib
import copy
import functools
import inspect
import json
import logging
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import torch
from torch import Tensor, nn
from transformers import AutoModelForCausalLM, AutoTokenizer, PreTrainedModel
from transformers.utils import logging as hf_logging

from src.model.compiling import compiled_forward
from src.model.fast.chunked_head import (
    check_chunked_head,
    chunked_log_probs,
    hidden_forward,
    plain_head,
)
from src.model.fast.grouped_attention import grouped_attention
from src.model.fast.lean_layers import lean_layers
from src.model.fast.onednn import onednn_linears
from src.model.fast.probe import device_of, proven
from src.model.fast.shared_prompt import continue_prompts
from src.model.model_settings import ModelSettings
from src.model.network import Scorer, Sequences
from src.model.offline import resolve_pretrained
from src.model.positions import position_ids
from src.model.precision import (
    DTYPES,
    check_finite_forward,
    computing,
    resolved_dtype,
    stored_dtype,
    with_contiguous_head,
)
from src.model.prompt_start import added_bos, prompt_token_ids
from src.utils.errors import ConfigError, MissingFileError

log = logging.getLogger(__name__)
hf_logging.disable_progress_bar()

# on the CPU, full float32 logits of at most this many entries (512 MiB) are made at once; a
# larger log-prob pass runs the head in chunks (`CausalLM._head_in_chunks`)
CPU_FULL_LOGITS = 2**27


class CausalLM(nn.Module):
    """A causal LM with its tokenizer, an `AdaptedNetwork`: the trained network of the generator,
    rewriter and reader roles."""

    def __init__(
        self,
        network: PreTrainedModel,
        tokenizer: Any,
        max_prompt_length: int | None = None,
        lean_activations: bool = True,
        compiled: bool = False,
        compute_dtype: torch.dtype = torch.float32,
    ):
        super().__init__()
        self.network = network
        self.tokenizer = tokenizer
        self.max_prompt_length = max_prompt_length
        self.lean_activations = lean_activations
        # what every pass computes in: a half type runs the forwards under autocast
        # (`src.model.precision`), float32 as the weights are
        self.compute_dtype = compute_dtype
        # the log-prob forwards' network call: compiled (`src.model.compiling`) or the module
        self._compiled_forward = compiled_forward(network) if compiled else None

    @property
    def compiled(self) -> bool:
        """Whether the log-prob forwards go through `torch.compile` (`model.compile`)."""
        return self._compiled_forward is not None

    @property
    def uses_lora(self) -> bool:
        """True when the network is a peft model, so the reference is the disabled adapter."""
        return hasattr(self.network, "disable_adapter")

    @functools.cached_property
    def keeps_few_logits(self) -> bool:
        """Whether the network can skip the vocabulary projection of prompt tokens."""
        base = self.network.get_base_model() if self.uses_lora else self.network
        return "logits_to_keep" in inspect.signature(base.forward).parameters

    @property
    def eos_token_ids(self) -> list[int]:
        """Every id that ends a completion: the tokenizer's EOS and the generation config's."""
        ids = {self.tokenizer.eos_token_id}
        configured = getattr(self.network.generation_config, "eos_token_id", None)
        if configured is not None:
            ids.update(configured if isinstance(configured, list) else [configured])
        return sorted(i for i in ids if i is not None)

    @functools.cached_property
    def bos_token_id(self) -> int | None:
        """The BOS every prompt starts with (`added_bos`), or None."""
        return added_bos(self.tokenizer)

    def prompt_ids(self, prompts: list[str]) -> list[list[int]]:
        """Each prompt's token ids as its model expects them (`prompt_token_ids`)."""
        return prompt_token_ids(self.tokenizer, prompts, self.max_prompt_length, self.bos_token_id)

    def encode_prompts(self, prompts: list[str]) -> dict[str, Tensor]:
        """Left-padded prompt ids (`prompt_ids`) and their mask on the network's device."""
        ids, mask = self._padded(self.prompt_ids(prompts), left=True)
        return {"input_ids": ids, "attention_mask": mask}

    def encode_completions(self, texts: list[str]) -> tuple[Tensor, Tensor]:
        """Right-padded ids of `texts` with EOS appended, and their mask, on the network's device."""
        eos = self.tokenizer.eos_token_id
        return self._padded([self._ids(text) + [eos] for text in texts])

    def _ids(self, text: str) -> list[int]:
        return self.tokenizer(text, add_special_tokens=False)["input_ids"]

    def _padded(self, rows: list[list[int]], left: bool = False) -> tuple[Tensor, Tensor]:
        """Token rows padded into ids and mask, on the network's device: on the right, or on
        the left where `left` (prompts, so that every row ends where decoding starts)."""
        width = max(len(row) for row in rows)
        ids = torch.full((len(rows), width), self.tokenizer.pad_token_id, dtype=torch.long)
        mask = torch.zeros((len(rows), width), dtype=torch.long)
        for i, row in enumerate(rows):
            place = slice(width - len(row), width) if left else slice(0, len(row))
            ids[i, place] = torch.tensor(row, dtype=torch.long)
            mask[i, place] = 1
        device = self.network.device
        return ids.to(device), mask.to(device)

    def trainable_parameters(self) -> list[nn.Parameter]:
        """The parameters with gradients: the adapter's under LoRA, all of them otherwise."""
        return [p for p in self.parameters() if p.requires_grad]

    def frozen_reference(self) -> Scorer:
        """The policy as it is now, frozen: under LoRA the base model with the adapter switched
        off (no copy, no memory); otherwise a frozen copy of the network."""
        if self.uses_lora:
            return AdapterDisabled(self)
        frozen = copy.deepcopy(self.network).eval().requires_grad_(False)
        return CausalLM(
            frozen,
            self.tokenizer,
            self.max_prompt_length,
            self.lean_activations,
            self.compiled,
            self.compute_dtype,
        )

    def token_log_probs(
        self,
        input_ids: Tensor,
        attention_mask: Tensor,
        num_targets: int,
        temperature: float = 1.0,
        with_entropy: bool = False,
        scored: Tensor | None = None,
    ) -> tuple[Tensor, Tensor | None]:
        """Log-probs of the last `num_targets` tokens of each row under the network.

        Position ids follow the attention mask, as sampling does with left padding, so the
        scores match the ones the samples were drawn from. `scored` [N, num_targets] (default:
        the attention mask there) names the positions that count; where the head runs in
        chunks the others are skipped and read 0 (padding, a tool's inserted tokens).
        """
        targets = input_ids[:, -num_targets:]
        # each position predicts the next token, so the last token predicts nothing scored:
        # the forward reads all but it
        read = attention_mask[:, :-1]
        inputs = {
            "input_ids": input_ids[:, :-1],
            "attention_mask": read,
            "position_ids": position_ids(read),
            "use_cache": False,
        }
        tokens = inputs["input_ids"].numel()
        if self._head_in_chunks(input_ids.size(0) * num_targets):
            with self._lean(tokens):  # the head's products routed as the network's layers are
                hidden = hidden_forward(self.network)(**inputs).logits[:, -num_targets:, :]
                if scored is None:
                    scored = attention_mask[:, -num_targets:]  # padding after a row's end: 0
                return chunked_log_probs(
                    self.network, hidden, targets, temperature, with_entropy, scored
                )
        with self._lean(tokens):
            logits = self._scoring_forward(**inputs, **self._keep_logits(num_targets)).logits
        logits = logits[:, -num_targets:, :]
        return target_log_probs(logits, targets, temperature, with_entropy)

    def log_probs(
        self, sequences: Sequences, temperature: float = 1.0, with_entropy: bool = False
    ) -> tuple[Tensor, Tensor | None]:
        """Per-token log-probs [N, T] of the completions (and entropies if asked).

        Rows that continue the same prompt (the G completions of a group sit next to each
        other) read it once: the prompt runs once per group and its keys and values serve
        every completion of the group, gradients included (`prompt_groups`)."""
        groups = prompt_groups(sequences.prompt_ids, sequences.prompt_mask)
        if groups is not None and not checkpointed(self.network):
            # about what the pass reads (each distinct prompt once, then the completions): the
            # rows its oneDNN verdicts are timed at
            tokens = sequences.prompt_ids[groups[0]].numel() + sequences.completion_ids.numel()
            with self._lean(tokens):
                return self._grouped_log_probs(sequences, *groups, temperature, with_entropy)
        input_ids = torch.cat([sequences.prompt_ids, sequences.completion_ids], dim=1)
        mask = torch.cat([sequences.prompt_mask, sequences.completion_mask], dim=1)
        return self.token_log_probs(
            input_ids,
            mask,
            sequences.completion_ids.size(1),
            temperature,
            with_entropy,
            sequences.action_mask,
        )

    def _grouped_log_probs(
        self,
        sequences: Sequences,
        first: Tensor,
        owner: Tensor,
        temperature: float,
        with_entropy: bool,
    ) -> tuple[Tensor, Tensor | None]:
        """`log_probs` with each distinct prompt (rows `first`) run once; row n continues the
        prompt of row first[owner[n]]."""
        completion_ids = sequences.completion_ids
        chunks = self._head_in_chunks(completion_ids.numel())
        # the prompt's last position predicts the first completion token, each completion
        # position the next one; the last completion token predicts nothing scored, so the
        # continuations read all but it (at least one token)
        read = max(1, completion_ids.size(1) - 1)
        last, outputs = self._continue_prompts(
            sequences.prompt_ids[first],
            sequences.prompt_mask[first],
            owner,
            completion_ids[:, :read],
            sequences.completion_mask[:, :read],
            hidden=chunks,
        )
        outputs = outputs[:, : completion_ids.size(1) - 1, :]
        if chunks:
            hidden = torch.cat([last, outputs], dim=1)
            return chunked_log_probs(
                self.network,
                hidden,
                completion_ids,
                temperature,
                with_entropy,
                sequences.action_mask,  # padding and inserted tokens: 0, not scored
            )
        head, head_entropy = target_log_probs(
            last, completion_ids[:, :1], temperature, with_entropy
        )
        rest, rest_entropy = target_log_probs(
            outputs, completion_ids[:, 1:], temperature, with_entropy
        )
        entropy = torch.cat([head_entropy, rest_entropy], dim=1) if with_entropy else None
        return torch.cat([head, rest], dim=1), entropy

    def _continue_prompts(
        self,
        prompt_ids: Tensor,
        prompt_mask: Tensor,
        owner: Tensor,
        ids: Tensor,
        mask: Tensor,
        hidden: bool = False,
    ) -> tuple[Tensor, Tensor]:
        """Logits of continuations `ids` [N, T] (`mask` 1 on real tokens) after distinct
        left-padded prompts [U, P], row n continuing prompt owner[n], each prompt run once
        where that is proven right for this network (`src.model.fast.shared_prompt`).
        Returns the logits of each row's last prompt position [N, 1, V] (they predict the
        first continuation token) and those of its continuation positions [N, T, V]; with
        `hidden`, the final hidden states [.., H] there instead."""
        return continue_prompts(
            hidden_forward(self.network) if hidden else self._scoring_forward,
            self.network,
            self._keep_logits,
            prompt_ids,
            prompt_mask,
            owner,
            ids,
            mask,
        )

    def _head_in_chunks(self, positions: int) -> bool:
        """Whether the log-prob forwards of `positions` scored positions stop at the hidden
        states and the head runs in chunks (`src.model.fast.chunked_head`): on a GPU, where
        the logits' memory is what limits a step; on the CPU where the full float32 logits
        would be more than `CPU_FULL_LOGITS` entries (Gemma's 262k vocabulary: a second
        product of the head in backward costs less than writing and reading them); never
        under `torch.compile` (which compiles the whole forward); once the probe has proven
        it for this network."""
        head = plain_head(self.network)
        if self._compiled_forward is not None or head is None:
            return False
        if device_of(self.network).type == "cpu" and positions * head.out_features <= (
            CPU_FULL_LOGITS
        ):
            return False
        return proven(
            "chunked_head", self.network, functools.partial(check_chunked_head, self.network)
        )

    def _scoring_forward(self, **kwargs: Any) -> Any:
        """The network's forward for log-probs: through `torch.compile` when `compiled`."""
        if self._compiled_forward is not None:
            return self._compiled_forward(**kwargs)
        return self.network(**kwargs)

    @contextlib.contextmanager
    def _lean(self, tokens: int | None = None) -> Iterator[int]:
        """The log-prob forwards' precision and fast paths: the products in `compute_dtype`
        (`computing`); the attention through `grouped_attention` where proven; `lean_layers`
        over the network when `lean_activations` is on (the block yields how many modules it
        switched), and the float32 linear layers' products through oneDNN where that is
        faster here at the rows of a pass of `tokens` tokens and proven; none under activation
        checkpointing, whose recomputation in backward runs outside the block, no oneDNN or
        grouped attention under `torch.compile`, which makes its own kernels, and no oneDNN
        in a half type."""
        plain = checkpointed(self.network)
        routed = not plain and self._compiled_forward is None
        with (
            computing(self.compute_dtype, device_of(self.network), self.network),
            grouped_attention(self.network, routed),
            lean_layers(self.network, self.lean_activations and not plain) as switched,
            onednn_linears(self.network, routed and self.compute_dtype == torch.float32, tokens),
        ):
            yield switched

    def _keep_logits(self, count: int) -> dict[str, int]:
        """`logits_to_keep` for a forward that needs only the last `count` positions' logits,
        where the network takes it."""
        return {"logits_to_keep": count} if self.keeps_few_logits else {}

    @torch.no_grad()
    def continuation_scores(
        self, contexts: list[str], continuations: list[list[str]]
    ) -> list[list[float]]:
        """Mean log-prob per token of each continuation after its context (e.g. the options of
        a question after the documents), in eval mode: the contexts run once, as one batch,
        and their key/value cache serves every continuation, so scoring four options costs
        little more than reading the context."""
        was_training = self.network.training
        self.network.eval()  # no dropout: a frozen model's choice must not vary
        try:
            with self._lean():  # without gradients: the products through oneDNN where proven
                return self._continuation_scores(contexts, continuations)
        finally:
            self.network.train(was_training)

    def _continuation_scores(
        self, contexts: list[str], continuations: list[list[str]]
    ) -> list[list[float]]:
        encoded = self.encode_prompts(contexts)  # left-padded, truncated like prompts
        device = encoded["input_ids"].device
        counts = torch.tensor([len(choices) for choices in continuations], device=device)
        texts = [text for choices in continuations for text in choices]
        eos = self.tokenizer.eos_token_id
        ids, mask = self._padded([self._ids(text) or [eos] for text in texts])  # no end marker
        owner = torch.arange(len(contexts), device=device).repeat_interleave(counts)
        first, logits = self._continue_prompts(
            encoded["input_ids"], encoded["attention_mask"], owner, ids, mask
        )  # first: what each context's last token predicts
        logits = torch.cat([first, logits[:, :-1, :]], dim=1).float()
        logps = torch.log_softmax(logits, dim=-1).gather(-1, ids.unsqueeze(-1)).squeeze(-1)
        weights = mask.to(logps.dtype)
        scores = ((logps * weights).sum(dim=1) / weights.sum(dim=1)).tolist()
        grouped, at = [], 0
        for count in counts.tolist():
            grouped.append(scores[at : at + count])
            at += count
        return grouped

    @contextlib.contextmanager
    def adapter_disabled(self) -> Iterator[None]:
        """Run the base model under a LoRA network (the reference policy, a rewriter's frozen
        planner and generator) at no memory cost; without an adapter the network is its base."""
        if not self.uses_lora:
            yield
            return
        with self.network.disable_adapter():
            yield

    def save(self, path: str | Path, merge: bool = True) -> Path:
        """Save a folder that `load_causal_lm` reads back.

        Under LoRA, `merge=True` writes plain HF weights with the adapter merged in (this
        unloads the adapter from the network, so do it last); `merge=False` writes only the
        adapter, which `load_causal_lm(base, adapter_path=folder)` puts back on its base model.
        """
        path = Path(path)
        network = self.network
        if self.uses_lora and merge:
            network = network.merge_and_unload()
        network.save_pretrained(path)
        self.tokenizer.save_pretrained(path)
        return path


def checkpointed(network: nn.Module) -> bool:
    """Whether activation checkpointing is on in any layer of `network`: a checkpointed layer
    runs twice in backward, so it must not write a shared key/value cache."""
    return any(getattr(module, "gradient_checkpointing", False) for module in network.modules())


def prompt_groups(prompt_ids: Tensor, prompt_mask: Tensor) -> tuple[Tensor, Tensor] | None:
    """Runs of rows with the same prompt: the first row of each run and, per row, the index of
    its run; None when no two neighbouring rows share a prompt (nothing to save)."""
    rows = torch.cat([prompt_ids, prompt_mask], dim=1)
    if rows.size(0) < 2:
        return None
    changes = (rows[1:] != rows[:-1]).any(dim=1)
    if bool(changes.all()):
        return None
    starts = torch.cat([changes.new_ones(1), changes])
    return starts.nonzero().flatten(), starts.long().cumsum(dim=0) - 1


ENTROPY_CHUNK = 2**24  # logits entries per entropy chunk (64 MiB in float32)


def target_log_probs(
    logits: Tensor, targets: Tensor, temperature: float = 1.0, with_entropy: bool = False
) -> tuple[Tensor, Tensor | None]:
    """Log-probs [N, T] of `targets` under `logits` [N, T, V] divided by the temperature, and
    the entropy of each position's distribution when asked (without gradient, over chunks of
    rows, so no second [N, T, V] tensor is made at once)."""
    logits = logits.float()
    if temperature != 1.0:
        logits = logits / temperature
    logps, log_norm = SelectedLogSoftmax.apply(logits, targets)
    if not with_entropy:
        return logps, None
    entropy = torch.empty_like(log_norm, requires_grad=False)
    rows = max(1, ENTROPY_CHUNK // max(1, logits.size(1) * logits.size(2)))
    with torch.no_grad():
        for start in range(0, logits.size(0), rows):
            part = logits[start : start + rows]
            probs = torch.softmax(part, dim=-1)
            entropy[start : start + rows] = log_norm[start : start + rows] - (probs * part).sum(-1)
    return logps, entropy


class SelectedLogSoftmax(torch.autograd.Function):
    """log_softmax(logits)[targets] [N, T] and the log normaliser [N, T] (no gradient) from
    logits [N, T, V]. Autograd's own backward of `gather - logsumexp` makes four vocabulary-wide
    tensors (the shifted logits, their exponential, its product with the gradient and the
    scattered one-hot gradient, then their sum); this one makes the single tensor it returns,
    the gradient softmax * (onehot - 1) * g, written in place. At SmolLM2's 49k vocabulary
    and 16 x 64 completion tokens each of those tensors is 200 MB."""

    @staticmethod
    def forward(ctx: Any, logits: Tensor, targets: Tensor) -> tuple[Tensor, Tensor]:
        log_norm = torch.logsumexp(logits, dim=-1)
        logps = logits.gather(-1, targets.unsqueeze(-1)).squeeze(-1) - log_norm
        ctx.save_for_backward(logits, log_norm, targets)
        ctx.mark_non_differentiable(log_norm)
        return logps, log_norm

    @staticmethod
    def backward(ctx: Any, grad: Tensor, _: Tensor) -> tuple[Tensor, None]:
        logits, log_norm, targets = ctx.saved_tensors
        grad_logits = torch.sub(logits, log_norm.unsqueeze(-1)).exp_()  # softmax
        grad_logits.mul_(grad.neg().unsqueeze(-1))
        grad_logits.scatter_add_(-1, targets.unsqueeze(-1), grad.unsqueeze(-1))
        return grad_logits, None


class AdapterDisabled:
    """The reference policy of a LoRA network: its base model, scored with the adapter off.

    Not an `nn.Module`, so the network it wraps is not registered (nor checkpointed) twice.
    """

    def __init__(self, lm: CausalLM) -> None:
        self.lm = lm

    @torch.no_grad()
    def log_probs(
        self, sequences: Sequences, temperature: float = 1.0, with_entropy: bool = False
    ) -> tuple[Tensor, Tensor | None]:
        """The base model's per-token log-probs of the completions."""
        with self.lm.adapter_disabled():
            return self.lm.log_probs(sequences, temperature, with_entropy)


def load_causal_lm(
    name_or_path: str,
    builder: Callable[[str], Any] | None = None,
    offline_fallback: dict[str, Any] | None = None,
    **keys: Any,
) -> CausalLM:
    """Load a causal LM by hub name or local folder, optionally 4-bit and with a LoRA adapter;
    `keys` are the `model.*` settings (`ModelSettings`, checked there).

    `builder`, when given, writes the folder first if it does not exist yet (the tiny model).
    `offline_fallback` names a packaged copy for when the hub is out of reach (see
    `src.model.offline`). `adapter_path` loads a saved LoRA adapter, trainable, instead of
    starting a fresh one from `lora`. `lean_activations` runs the gated MLPs and RMSNorms of
    training forwards through `src.model.fast.lean_layers` (less memory, the same values). `compile` runs
    the forwards of log-probs through `torch.compile` (`src.model.compiling`). A half `dtype`
    is what every pass computes in; the weights that train stay float32 where
    `trained_in_float32` (`src.model.precision.stored_dtype`); a forward that gives NaN or
    infinite logits in it is refused in one line (`check_finite_forward`).
    """
    settings = ModelSettings.of(keys, "load_causal_lm")
    if builder is not None and not (Path(name_or_path) / "config.json").exists():
        log.info("Building model folder %s", name_or_path)
        builder(name_or_path)
    check_model_folders(name_or_path, settings.adapter_path)
    dtype = resolved_dtype(settings.dtype)
    name_or_path, source_kwargs = resolve_pretrained(name_or_path, offline_fallback)
    trains_every_weight = (
        settings.trained_in_float32 and not settings.lora and settings.adapter_path is None
    )
    kwargs: dict[str, Any] = {
        "dtype": stored_dtype(dtype, trains_every_weight and not settings.load_in_4bit),
        "trust_remote_code": settings.trust_remote_code,
        **source_kwargs,
    }
    if settings.load_in_4bit:
        from transformers import BitsAndBytesConfig

        kwargs["quantization_config"] = BitsAndBytesConfig(
            load_in_4bit=True,
            bnb_4bit_quant_type="nf4",
            bnb_4bit_compute_dtype=DTYPES[dtype],
            bnb_4bit_use_double_quant=True,
        )
    try:
        tokenizer = AutoTokenizer.from_pretrained(
            name_or_path, trust_remote_code=settings.trust_remote_code, **source_kwargs
        )
        network = AutoModelForCausalLM.from_pretrained(name_or_path, **kwargs)
    except OSError as error:
        raise MissingFileError(
            f"Could not load model {name_or_path!r}: not a local folder with config.json, and the "
            f"hub could not provide it ({error}). Set model.name_or_path to a local folder."
        ) from error
    network.train()  # from_pretrained returns eval mode; this network is loaded to be trained
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    network = prepared_for_training(network, settings.gradient_checkpointing, settings.load_in_4bit)
    # after the preparation: an eval forward before it repacks 4-bit weights for inference
    check_finite_forward(with_contiguous_head(network), dtype, name_or_path)
    if settings.adapter_path is not None:
        network = with_saved_adapter(network, settings.adapter_path, name_or_path)
    elif settings.lora:
        from peft import LoraConfig, get_peft_model

        network = get_peft_model(network, LoraConfig(task_type="CAUSAL_LM", **settings.lora))
    return CausalLM(
        network,
        tokenizer,
        settings.max_prompt_length,
        settings.lean_activations,
        settings.compile,
        DTYPES[dtype],
    )


# the `model.*` keys it reads through its settings object (the settings check, runs/read_keys.py)
load_causal_lm.more_keys = ModelSettings.more_keys  # type: ignore[attr-defined]


def with_saved_adapter(network: nn.Module, adapter_path: str, name_or_path: str) -> nn.Module:
    """`network` with the LoRA adapter saved in `adapter_path`, trainable; an adapter whose
    shapes are not this network's (trained on another base model) is one line naming both."""
    from peft import PeftModel

    try:
        return PeftModel.from_pretrained(network, adapter_path, is_trainable=True)
    except RuntimeError as error:
        if "size mismatch" not in str(error):
            raise
        saved = Path(adapter_path) / "adapter_config.json"
        base = json.loads(saved.read_text()).get("base_model_name_or_path", "another model")
        raise ConfigError(
            f"model.adapter_path: the adapter in {adapter_path} was trained on {base}, whose "
            f"layers differ from this run's model ({name_or_path}): give an adapter of this "
            "model, or choose its base with model=..."
        ) from None


def check_model_folders(name_or_path: str, adapter_path: str | None, key: str = "model") -> None:
    """`MissingFileError` naming the key for a local model folder that is not there, or an
    adapter folder without its adapter_config.json, before anything loads; `key` is where the
    model's config sits (`policy.reader` for a rewriter's reader)."""
    looks_local = Path(name_or_path).is_absolute() or name_or_path.startswith(".")
    if looks_local and not Path(name_or_path).is_dir():
        raise MissingFileError(
            f"{key}.name_or_path: no model folder at {name_or_path}; "
            "point it to a folder holding config.json"
        )
    if adapter_path is not None and not (Path(adapter_path) / "adapter_config.json").is_file():
        raise MissingFileError(
            f"{key}.adapter_path: no LoRA adapter (adapter_config.json) in {adapter_path}"
        )


def prepared_for_training(
    network: nn.Module, gradient_checkpointing: bool, load_in_4bit: bool
) -> nn.Module:
    """The loaded network with gradient checkpointing where asked (non-reentrant: it works
    with frozen inputs, LoRA, and several backward passes) and, for 4-bit weights, peft's
    preparation for training with them kept differentiable on the CPU."""
    checkpointing = {"use_reentrant": False}
    if gradient_checkpointing:
        network.gradient_checkpointing_enable(gradient_checkpointing_kwargs=checkpointing)
    if load_in_4bit:
        from peft import prepare_model_for_kbit_training

        keep_4bit_differentiable_on_cpu(network)
        network = prepare_model_for_kbit_training(
            network,
            use_gradient_checkpointing=gradient_checkpointing,
            gradient_checkpointing_kwargs=checkpointing,
        )
    return network


def keep_4bit_differentiable_on_cpu(network: nn.Module) -> None:
    """Stop bitsandbytes repacking 4-bit weights for CPU inference on the first eval forward.

    Once repacked, every later forward, training ones included, uses a kernel without
    autograd, so gradients through the frozen layers are silently dropped.
    """
    for module in network.modules():
        if hasattr(module, "support_avx512bf16_for_cpu"):
            module.support_avx512bf16_for_cpu = False
