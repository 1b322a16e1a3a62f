"""The masked character generator: a bidirectional transformer that fills every masked
position of a window in one step (diffusion-style, a single denoising step).

As a GRPO policy its prompt is the masked window and its completion the characters drawn at
the masked positions, left to right. The log-probability of a completion is that of its
characters at those positions, so the objective (advantages, clipping, k3 KL, loss types)
applies unchanged: `CharDiffusionNetwork` is a `PolicyNetwork` like the causal LM.

A sampler may reveal the characters over several denoising steps (`reveal_steps`, the step
that drew each one): a character's log-probability is then read from the window as it was at
its step, the characters of earlier steps shown and the rest still masked.
"""

from __future__ import annotations

import copy
import logging
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import torch
from torch import Tensor, nn

from src.model.network import Sequences
from src.model.precision import DTYPES, resolved_dtype
from src.recipes.char_diffusion.encoder import (
    FIRST_CHAR,
    MASK,
    PAD,
    CharEncoder,
    CharTokenizer,
    check_heads,
    padded,
    read_char_model,
    save_char_model,
)
from src.recipes.char_diffusion.settings import SETTINGS
from src.utils.errors import ConfigError
from src.utils.setting import Declared

log = logging.getLogger(__name__)
KIND = "char_diffusion"


class CharDiffusionNetwork(nn.Module):
    """Predicts a character for every position at once; only masked positions are read."""

    def __init__(
        self,
        max_length: int = 64,
        hidden_size: int = 128,
        num_layers: int = 4,
        num_heads: int = 4,
        intermediate_size: int = 512,
        dropout: float = 0.1,
        mask_char: str = "\u2588",
    ) -> None:
        super().__init__()
        self.settings = {
            "max_length": max_length,
            "hidden_size": hidden_size,
            "num_layers": num_layers,
            "num_heads": num_heads,
            "intermediate_size": intermediate_size,
            "dropout": dropout,
        }
        self.tokenizer = CharTokenizer(mask_char)
        self.encoder = CharEncoder(self.tokenizer.vocab_size, **self.settings)
        self.settings["mask_char"] = mask_char
        self.head = nn.Linear(hidden_size, self.tokenizer.vocab_size)

    @property
    def device(self) -> torch.device:
        return self.head.weight.device

    def logits(self, ids: Tensor) -> Tensor:
        """Logits [N, W, V] for every position; padding, mask and unknown ids are never
        predicted (their logits are -inf)."""
        logits = self.head(self.encoder(ids)).float()
        return logits.index_fill(-1, torch.arange(FIRST_CHAR, device=logits.device), -torch.inf)

    def masked_logits(self, prompt_ids: Tensor, width: int | None = None) -> tuple[Tensor, Tensor]:
        """Logits [N, M, V] at each row's masked positions, left to right, and the mask [N, M]
        of real ones (rows have different numbers of masked positions); `width` cuts M."""
        index, valid = masked_positions(prompt_ids, width)
        return self.logits_at(prompt_ids, index), valid

    def logits_at(self, ids: Tensor, index: Tensor) -> Tensor:
        """Logits [N, M, V] at the columns `index` [N, M] of each row of `ids` [N, W]."""
        logits = self.logits(ids)
        return logits.gather(1, index.unsqueeze(-1).expand(-1, -1, logits.size(-1)))

    def stepwise_logits(self, sequences: Sequences) -> Tensor:
        """Logits [N, M, V] for each completion character from the window as its denoising step
        saw it (`reveal_steps`): for step k, the characters of steps < k shown at their masked
        positions, the others masked. All steps run as one batch of K * N windows."""
        prompt_ids = sequences.prompt_ids.to(self.device)
        targets = sequences.completion_ids.to(self.device)
        index, valid = masked_positions(prompt_ids, targets.size(1))
        steps = sequences.reveal_steps
        if steps is None or not bool((steps > 0).any()):
            return self.logits_at(prompt_ids, index)
        steps = steps.to(self.device)
        count = int(steps.max()) + 1
        windows = []
        for step in range(count):
            shown = valid & (steps < step) & (targets >= FIRST_CHAR)
            windows.append(revealed(prompt_ids, index, targets, shown))
        logits = self.logits_at(torch.cat(windows), index.repeat(count, 1))
        logits = logits.view(count, *targets.shape, -1)
        own = steps.unsqueeze(0).unsqueeze(-1)  # each character's own step, in [0, count)
        return logits.gather(0, own.expand(1, -1, -1, logits.size(-1))).squeeze(0)

    # ------------------------------------------------------------------ PolicyNetwork
    def log_probs(
        self, sequences: Sequences, temperature: float = 1.0, with_entropy: bool = False
    ) -> tuple[Tensor, Tensor | None]:
        """Log-probs [N, M] of the completion characters at the masked positions, each from
        the window as its denoising step saw it (`stepwise_logits`)."""
        logits = self.stepwise_logits(sequences)
        logps = torch.log_softmax(logits / temperature, dim=-1)
        targets = sequences.completion_ids.to(self.device)
        per_token = logps.gather(-1, targets.clamp(min=FIRST_CHAR).unsqueeze(-1)).squeeze(-1)
        per_token = per_token.masked_fill(targets < FIRST_CHAR, 0.0)  # padding, unknown
        entropy = None
        if with_entropy:
            with torch.no_grad():
                probs = logps.exp()
                entropy = -(probs * logps.masked_fill(probs == 0, 0.0)).sum(-1)
        return per_token, entropy

    def encode_prompts(self, prompts: list[str]) -> dict[str, Tensor]:
        """Masked windows as ids [N, W], left-padded when their lengths differ."""
        ids = padded([self.tokenizer.encode(prompt) for prompt in prompts], left=True)
        return {
            "input_ids": ids.to(self.device),
            "attention_mask": (ids != PAD).long().to(self.device),
        }

    def encode_completions(self, texts: list[str]) -> tuple[Tensor, Tensor]:
        """The characters that fill each window's masked positions, right-padded; unknown
        characters (outside the alphabet) are not counted."""
        ids = padded([self.tokenizer.encode(text) for text in texts], min_width=1)
        mask = (ids >= FIRST_CHAR).long()
        return ids.to(self.device), mask.to(self.device)

    def frozen_reference(self) -> CharDiffusionNetwork:
        """A frozen copy of the network as it is now, in eval mode."""
        return copy.deepcopy(self).eval().requires_grad_(False)

    def trainable_parameters(self) -> list[nn.Parameter]:
        return [parameter for parameter in self.parameters() if parameter.requires_grad]

    def save(self, path: str | Path, merge: bool = True) -> Path:
        """Write the folder `model=char_diffusion model.checkpoint=...` loads again."""
        return save_char_model(self, path, KIND, self.settings)


def masked_positions(prompt_ids: Tensor, width: int | None = None) -> tuple[Tensor, Tensor]:
    """Column index [N, M] of each row's masked positions, left to right (0 where a row has
    fewer), and the mask [N, M] of real ones; M is the most any row has, or `width`."""
    is_masked = prompt_ids == MASK
    counts = is_masked.sum(dim=1)
    most = int(counts.max()) if counts.numel() else 0
    width = most if width is None else width
    # stable sort puts masked columns first, in their order
    order = torch.sort((~is_masked).int(), dim=1, stable=True).indices
    index = order[:, :width]
    if index.size(1) < width:
        index = torch.cat([index, index.new_zeros(index.size(0), width - index.size(1))], dim=1)
    valid = torch.arange(width, device=prompt_ids.device).unsqueeze(0) < counts.unsqueeze(1)
    return index.masked_fill(~valid, 0), valid


def revealed(ids: Tensor, index: Tensor, chars: Tensor, shown: Tensor) -> Tensor:
    """A copy of windows `ids` [N, W] with `chars` [N, M] written at the columns `index`
    [N, M] where `shown` [N, M] is true (the other columns unchanged)."""
    out = ids.clone()
    rows = torch.arange(ids.size(0), device=ids.device).unsqueeze(1).expand_as(index)
    out[rows[shown], index[shown]] = chars[shown]
    return out


@dataclass(frozen=True)
class GeneratorShape(Declared):
    """The generator's architecture, dropout and the character its masked positions show:
    the `model.*` keys of model=char_diffusion beside the loading ones, each field the key of
    its name (its comment in conf/model/char_diffusion.yaml)."""

    SECTION = "model"
    TABLE = SETTINGS

    max_length: int = 64
    hidden_size: int = 128
    num_layers: int = 4
    num_heads: int = 4
    intermediate_size: int = 512
    dropout: float = 0.1
    mask_char: str = "\u2588"

    def __post_init__(self) -> None:
        super().__post_init__()
        check_heads(self.SECTION, self.hidden_size, self.num_heads)


def load_char_diffusion(
    checkpoint: str | None = None,
    seed: int = 0,
    dtype: str = "float32",
    lora: dict[str, Any] | None = None,
    load_in_4bit: bool = False,
    adapter_path: str | None = None,
    **shape: Any,
) -> CharDiffusionNetwork:
    """The generator saved in `checkpoint` (its architecture wins over the one given here),
    or a freshly initialised one from `seed` when `checkpoint` is None; `shape` holds its
    architecture, dropout and mask character (`GeneratorShape`, checked there). `lora`,
    `load_in_4bit` and `adapter_path` are the causal models' keys, accepted so that one call
    loads either kind, and refused when set."""
    built = GeneratorShape.of(shape, "model=char_diffusion")
    if adapter_path:
        raise ConfigError(
            f"model=char_diffusion has no adapters: {adapter_path} cannot load onto it; give a "
            "saved char generator folder as model.checkpoint instead"
        )
    if lora or load_in_4bit:
        raise ConfigError(
            "model=char_diffusion trains all of its few weights: LoRA and 4-bit do not apply; "
            "drop lora and 4bit from hardware=[...]"
        )
    if checkpoint is None:
        with torch.random.fork_rng():
            torch.manual_seed(seed)
            network = CharDiffusionNetwork(**asdict(built))
        log.info("Char generator: freshly initialised (seed %d)", seed)
    else:
        settings, weights = read_char_model(checkpoint, KIND, "generator_checkpoint")
        # the architecture is the saved one; dropout and the character shown at masked
        # positions (the mask id is the same whatever shows it) are this run's
        settings.update(dropout=built.dropout, mask_char=built.mask_char)
        network = CharDiffusionNetwork(**settings)
        network.load_state_dict(weights)
        log.info("Char generator: loaded %s", checkpoint)
    return network.to(DTYPES[resolved_dtype(dtype)])  # hardware=[cpu,bf16]: bfloat16 where fast


# the `model.*` keys it reads through `shape` (the settings check, runs/read_keys.py)
load_char_diffusion.more_keys = GeneratorShape.more_keys  # type: ignore[attr-defined]
