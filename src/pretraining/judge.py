"""Training the judge of `task=char_diffusion`: tell real windows from corrupted ones.

Corrupted windows come in three kinds, drawn afresh every step: masked spans filled by the
pretrained generator (`generated`), by the generator partly trained (`early`), and windows
with a few characters swapped for random ones (`swapped`). The generators fill at a
temperature drawn per batch from `temperatures` (0: greedy), so the judge also knows the
degenerate fills of a sharpened generator (runs of spaces or of one letter), the first thing
GRPO against a judge that never saw them learns to write. Half of every batch is real. Held-out windows report the judge's accuracy on each kind
(`judge/val_accuracy_<kind>`, threshold 0.5) and its mean score of real and generated ones.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Callable
from pathlib import Path
from typing import Any

import lightning as L
import torch
from omegaconf import DictConfig
from torch import Tensor

from src.data.char_windows import CharWindowDataModule
from src.model.char_diffusion import CharDiffusionNetwork, load_char_diffusion
from src.model.char_encoder import ALPHABET
from src.model.char_judge import CharJudge
from src.policy.infill import Infill
from src.pretraining.fit import fit_stage, warmup_cosine
from src.pretraining.masked_lm import EARLY
from src.rollout.char_diffusion import CharDiffusionSampler
from src.utils.config import build
from src.utils.errors import ConfigError

log = logging.getLogger(__name__)
KINDS = ("generated", "early", "swapped")


class Corruptor:
    """Makes corrupted versions of windows, of the kinds in `weights` (kind -> share)."""

    def __init__(
        self,
        generators: dict[str, CharDiffusionNetwork],
        temperatures: list[float],
        top_p: float,
        remask: Callable[[dict[str, Any], random.Random], dict[str, Any]],
        mask_char: str,
        weights: dict[str, float],
        max_swaps: int,
    ) -> None:
        if not temperatures or min(temperatures) < 0:
            raise ConfigError(
                f"stages.judge.train.temperatures must be a non-empty list of numbers >= 0 "
                f"(0: greedy), got {temperatures}"
            )
        self.generators = generators
        self.temperatures = list(temperatures)
        self.top_p = top_p
        self.remask = remask
        self.infill = Infill(mask_char)
        self.weights = {kind: share for kind, share in weights.items() if share > 0}
        self.max_swaps = max_swaps

    def corrupt(self, rows: list[dict[str, Any]], rng: random.Random) -> list[str]:
        """One corrupted window per row, each of a kind drawn by `weights`."""
        kinds = rng.choices(list(self.weights), list(self.weights.values()), k=len(rows))
        texts = [""] * len(rows)
        for kind in self.weights:
            chosen = [i for i, k in enumerate(kinds) if k == kind]
            if chosen:
                made = self.make(kind, [rows[i] for i in chosen], rng)
                for i, text in zip(chosen, made, strict=True):
                    texts[i] = text
        return texts

    def make(self, kind: str, rows: list[dict[str, Any]], rng: random.Random) -> list[str]:
        """Windows of one kind of corruption, made from `rows`."""
        if kind == "swapped":
            return [swapped(row["text"], rng.randint(1, self.max_swaps), rng) for row in rows]
        masked = [self.remask(row, rng) for row in rows]
        temperature = rng.choice(self.temperatures)
        sampler = CharDiffusionSampler(len(rows[0]["text"]), temperature or 1.0, self.top_p)
        prompts = [row["masked"] for row in masked]
        rollout = sampler.sample(self.generators[kind], prompts, 1, greedy=temperature == 0)
        return [
            self.infill.filled(row["masked"], fill)
            for row, fill in zip(masked, rollout.completions, strict=True)
        ]


def swapped(text: str, count: int, rng: random.Random) -> str:
    """`text` with `count` positions replaced by a different random character."""
    chars = list(text)
    for position in rng.sample(range(len(chars)), min(count, len(chars))):
        chars[position] = rng.choice([c for c in ALPHABET if c != chars[position]])
    return "".join(chars)


class JudgeModule(L.LightningModule):
    """Binary cross-entropy of real (1) against corrupted (0) windows, half and half."""

    def __init__(
        self,
        judge: CharJudge,
        corruptor: Corruptor,
        optimizer: Callable[..., torch.optim.Optimizer],
        max_steps: int,
        warmup_steps: int,
        seed: int,
    ) -> None:
        super().__init__()
        self.judge = judge
        self.corruptor = corruptor
        self.optimizer_factory = optimizer
        self.max_steps = max_steps
        self.warmup_steps = warmup_steps
        self.seed = seed
        self.val_scores: dict[str, list[float]] = {}
        self.last_val: dict[str, float] = {}

    def configure_optimizers(self) -> Any:
        parameters = self.judge.parameters()
        return warmup_cosine(self.optimizer_factory, parameters, self.warmup_steps, self.max_steps)

    def training_step(self, batch: list[dict[str, Any]], batch_idx: int) -> Tensor:
        rng = random.Random(f"{self.seed}:judge:{self.global_step}")
        texts = [row["text"] for row in batch] + self.corruptor.corrupt(batch, rng)
        labels = torch.tensor([1.0] * len(batch) + [0.0] * len(batch), device=self.device)
        logits = self.judge(self.judge.encode(texts))
        loss = torch.nn.functional.binary_cross_entropy_with_logits(logits, labels)
        accuracy = ((logits > 0).float() == labels).float().mean()
        self.log("judge/loss", loss, prog_bar=True)
        self.log("judge/accuracy", accuracy)
        return loss

    def validation_step(self, batch: list[dict[str, Any]], batch_idx: int) -> None:
        rng = random.Random(f"{self.seed}:judge-val:{batch_idx}")
        scored = {"real": [row["text"] for row in batch]}
        for kind in self.corruptor.weights:
            scored[kind] = self.corruptor.make(kind, batch, rng)
        for kind, texts in scored.items():
            self.val_scores.setdefault(kind, []).extend(self.judge.score(texts))

    def on_validation_epoch_end(self) -> None:
        scores, self.val_scores = self.val_scores, {}
        if self.trainer.sanity_checking or not scores:
            return
        results = {}
        for kind, values in scores.items():
            right = [v > 0.5 if kind == "real" else v <= 0.5 for v in values]
            results[f"judge/val_accuracy_{kind}"] = sum(right) / len(right)
            results[f"judge/val_score_{kind}"] = sum(values) / len(values)
        self.last_val = results
        self.log_dict(results)


def train_judge(
    folder: Path,
    cfg: DictConfig,
    datamodule: CharWindowDataModule,
    loggers: list[Any],
    untrained: bool = False,
    *,
    model: dict[str, Any],
    negatives: dict[str, float],
    temperatures: list[float],
    max_swaps: int,
    max_steps: int,
    batch_size: int,
    optimizer: Callable[..., torch.optim.Optimizer],
    warmup_steps: int,
    eval_every_n_steps: int,
) -> dict[str, Any]:
    """Train a judge (`model`: its architecture) against the generator of
    `cfg.generator_checkpoint` and its early snapshot; save it into `folder`. `untrained`
    saves it as initialised (a dry run). Returns what the stage did."""
    unknown = set(negatives) - set(KINDS)
    if unknown or not any(share > 0 for share in negatives.values()):
        raise ValueError(f"negatives must give positive shares to some of {KINDS}, got {negatives}")
    torch.manual_seed(cfg.seed)
    judge = CharJudge(max_length=datamodule.window, **model)
    if untrained:
        judge.save(folder)
        return {"steps": 0, "untrained": True}
    generator_folder = Path(str(cfg.generator_checkpoint))
    generators = {"generated": build(cfg.model).eval().requires_grad_(False)}
    early = generator_folder / EARLY
    generators["early"] = (
        load_char_diffusion(str(early)).eval().requires_grad_(False)
        if early.is_dir()
        else generators["generated"]
    )
    corruptor = Corruptor(
        generators,
        temperatures,
        float(cfg.rollout.top_p),
        datamodule.remasked,
        datamodule.mask_char,
        negatives,
        max_swaps,
    )
    module = JudgeModule(judge, corruptor, optimizer, max_steps, warmup_steps, cfg.seed)
    log.info("Char judge: %d steps against %s", max_steps, generator_folder)
    steps = fit_stage(
        module,
        "judge",
        datamodule,
        loggers,
        cfg.trainer.accelerator,
        max_steps=max_steps,
        batch_size=batch_size,
        eval_every_n_steps=eval_every_n_steps,
        seed=cfg.seed + 1,
    )
    judge.save(folder)
    return {"steps": steps, **module.last_val}
