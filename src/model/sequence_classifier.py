"""A frozen Hugging Face sequence-classification model scoring texts: the learned reward model.

Any `AutoModelForSequenceClassification` checkpoint (a local folder or a hub name) is loaded
once, frozen, and asked for one number per text: the raw logit of a one-output reward model,
or the probability of the "good" label of a classifier. Prompts, when given, go in as the first
segment of a text pair, as reward models are trained on (prompt, answer).
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import torch
from transformers import AutoModelForSequenceClassification, AutoTokenizer
from transformers.utils import logging as hf_logging

from src.model.offline import hub_cached
from src.model.precision import DTYPES
from src.utils.errors import ConfigError, MissingFileError
from src.utils.hub import hub_reachable

log = logging.getLogger(__name__)
hf_logging.disable_progress_bar()

CONFIG_KEY = "reward.functions.judge.model"  # the setting that names the reward model


class SequenceClassifierScorer:
    """One score per text from a frozen sequence classifier, batched and without gradients.

    `positive_label` picks the class whose softmax probability is the score when the model has
    several outputs (default: the last label); a one-output model's logit is used as it is.
    `device` is `auto` (CUDA when available, else the CPU) or a torch device string.
    """

    def __init__(
        self,
        name_or_path: str,
        device: str = "auto",
        batch_size: int = 16,
        max_length: int = 512,
        positive_label: int | None = None,
        dtype: str = "float32",
    ) -> None:
        if batch_size < 1:
            raise ConfigError(f"{CONFIG_KEY}: batch_size must be at least 1, got {batch_size}")
        if max_length < 1:
            raise ConfigError(f"{CONFIG_KEY}: max_length must be at least 1, got {max_length}")
        if dtype not in DTYPES:
            raise ConfigError(f"{CONFIG_KEY}: dtype must be one of {sorted(DTYPES)}, got {dtype!r}")
        self.device = resolve_device(device)
        self.name_or_path = str(name_or_path)
        self.batch_size = batch_size
        self.max_length = max_length
        source, extra = resolve_source(self.name_or_path)
        try:
            self.tokenizer = AutoTokenizer.from_pretrained(source, trust_remote_code=False, **extra)
            self.model = AutoModelForSequenceClassification.from_pretrained(
                source, dtype=DTYPES[dtype], trust_remote_code=False, **extra
            )
        except OSError as error:
            raise MissingFileError(
                f"{CONFIG_KEY}={self.name_or_path!r} could not be loaded ({first_line(error)}); "
                "point it to a folder holding a sequence-classification model"
            ) from error
        self.model.eval().requires_grad_(False).to(self.device)
        self._set_padding()
        self.positive_label = self._checked_label(positive_label)

    @property
    def num_labels(self) -> int:
        """How many outputs the classification head has (1 for a scalar reward model)."""
        return int(self.model.config.num_labels)

    def _set_padding(self) -> None:
        """Pad on the right with the pad token (the EOS token if there is none), and tell the
        model which id that is: decoder classifiers read each row's last token that is not it."""
        if self.tokenizer.pad_token is None:
            if self.tokenizer.eos_token is None:
                raise ConfigError(
                    f"{CONFIG_KEY}={self.name_or_path!r}: the tokenizer has neither a pad nor an "
                    "EOS token, so batches cannot be padded; use a model whose tokenizer has one"
                )
            self.tokenizer.pad_token = self.tokenizer.eos_token
        self.model.config.pad_token_id = self.tokenizer.pad_token_id
        self.tokenizer.padding_side = "right"

    def _checked_label(self, positive_label: int | None) -> int | None:
        """The label whose probability is the score (None for a one-output model)."""
        if self.num_labels == 1:
            if positive_label not in (None, 0):
                raise ConfigError(
                    f"{CONFIG_KEY}={self.name_or_path!r} has a single output, so positive_label "
                    f"must be unset or 0, got {positive_label}"
                )
            return None
        if positive_label is None:
            return self.num_labels - 1
        if not 0 <= positive_label < self.num_labels:
            raise ConfigError(
                f"{CONFIG_KEY}={self.name_or_path!r} has {self.num_labels} labels, so "
                f"positive_label must be in 0..{self.num_labels - 1}, got {positive_label}"
            )
        return positive_label

    @torch.no_grad()
    def score(self, texts: list[str], pairs: list[str] | None = None) -> list[float]:
        """One float per text, in input order; with `pairs`, row i is scored as the text pair
        (pairs[i], texts[i]), i.e. (prompt, answer)."""
        if pairs is not None and len(pairs) != len(texts):
            raise ValueError(f"{len(texts)} texts but {len(pairs)} pairs")
        scores: list[float] = []
        for start in range(0, len(texts), self.batch_size):
            answers = list(texts[start : start + self.batch_size])
            prompts = list(pairs[start : start + self.batch_size]) if pairs is not None else None
            encoded = self._encode(answers, prompts)
            logits = self.model(**encoded).logits.float()
            if self.positive_label is None:
                batch_scores = logits[:, 0]
            else:
                batch_scores = torch.softmax(logits, dim=-1)[:, self.positive_label]
            scores.extend(float(value) for value in batch_scores.cpu().tolist())
        return scores

    def _encode(self, answers: list[str], prompts: list[str] | None) -> dict[str, Any]:
        """Token ids of one batch, truncated to `max_length`, padded to its longest row."""
        first, second = (answers, None) if prompts is None else (prompts, answers)
        return self.tokenizer(
            first,
            second,
            padding=True,
            truncation=True,
            max_length=self.max_length,
            return_tensors="pt",
        ).to(self.device)


def resolve_device(device: str) -> torch.device:
    """`auto` is CUDA when available, else the CPU; anything else is taken as given, refused
    when it names no device or a CUDA device this machine does not have."""
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        chosen = torch.device(device)
    except (RuntimeError, TypeError) as error:
        raise ConfigError(
            f"{CONFIG_KEY} device={device!r} is no torch device; use auto, cpu, cuda or cuda:N"
        ) from error
    if chosen.type == "cuda":
        count = torch.cuda.device_count() if torch.cuda.is_available() else 0
        if (chosen.index or 0) >= count:
            raise ConfigError(
                f"{CONFIG_KEY} device={device!r}: this machine has {count} CUDA device(s); "
                "use auto or cpu"
            )
    return chosen


def resolve_source(name_or_path: str) -> tuple[str, dict[str, Any]]:
    """Where to load the model from and extra `from_pretrained` arguments, decided before any
    network call so that a missing folder or an offline hub name fails at once, in one line."""
    looks_local = Path(name_or_path).is_absolute() or name_or_path.startswith((".", "~"))
    folder = Path(name_or_path).expanduser()
    if folder.is_dir():
        if not (folder / "config.json").is_file():
            raise MissingFileError(
                f"{CONFIG_KEY}={name_or_path!r}: the folder holds no config.json; "
                "point it to a saved sequence-classification model"
            )
        return str(folder), {}
    if looks_local:
        raise MissingFileError(
            f"{CONFIG_KEY}={name_or_path!r}: no model folder there; "
            "point it to a folder holding config.json"
        )
    if hub_reachable():
        return name_or_path, {}
    if hub_cached(name_or_path):
        return name_or_path, {"local_files_only": True}
    raise MissingFileError(
        f"{CONFIG_KEY}={name_or_path!r}: no local folder, not in the Hugging Face cache, and "
        "the hub cannot be reached; download it while online or point the key at a local folder"
    )


def first_line(error: BaseException) -> str:
    """The first line of an error's text, so the message stays on one line."""
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__
