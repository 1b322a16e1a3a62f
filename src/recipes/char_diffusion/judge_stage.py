"""Training the judge of `task=char_diffusion`: tell real windows from corrupted ones.

Corrupted windows come in kinds, drawn afresh every step: masked spans filled by the
pretrained generator (`generated`), by the generator partly trained (`early`), windows with a
few characters swapped for random ones (`swapped`), and, in the adversarial rounds
(src/recipes/char_diffusion/rounds.py), spans filled by the GRPO policies of every earlier round (`replay`, one
policy drawn per batch, so no round's tricks are forgotten). The generators fill at a
temperature drawn per batch from `temperatures` (0: greedy), so the judge also knows the
degenerate fills of a sharpened generator (runs of spaces or of one letter). Half of every
batch is real. Held-out windows report the judge's accuracy on each kind
(`judge/val_accuracy_<kind>`, threshold 0.5) and its mean score of each kind
(`judge/val_score_<kind>`). A later round's judge continues the one before (`init`).

A judge that sees the mask (`model.sees_mask`) is shown every window with the positions that
were filled: a real window with a fresh mask over its own characters, a generated one with the
mask its generator filled, and a swapped one with its random characters inside a fresh mask.

A judge with a character head (`char_loss` above 0) also learns, character by character,
whether each is the real window's own (replaced-character detection): over the filled
positions for a judge that sees the mask, else over the whole window. Its loss joins the
window loss (weight `window_loss`) with weight `char_loss`, and held-out windows report the
share of characters it gets right per kind (`judge/val_char_accuracy_<kind>`). Without
`char_on_real` only the corrupted windows' characters count: every character of a real window
is its own, so they teach that a window looking real is right throughout, not which of a
generated fill's characters are."""

from __future__ import annotations

import logging
import random
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, NamedTuple

import lightning as L
import torch
from omegaconf import DictConfig
from torch import Tensor

from src.pretraining.fit import StageLength, fit_stage, warmup_cosine
from src.pretraining.folders import stage_checkpoint
from src.recipes.char_diffusion.encoder import ALPHABET, PAD
from src.recipes.char_diffusion.infill import Infill, restored
from src.recipes.char_diffusion.judge_network import CharJudge, load_char_judge
from src.recipes.char_diffusion.masked_lm import EARLY
from src.recipes.char_diffusion.network import CharDiffusionNetwork, load_char_diffusion
from src.recipes.char_diffusion.sampler import CharDiffusionSampler
from src.recipes.char_diffusion.settings import SETTINGS
from src.recipes.char_diffusion.windows import CharWindowDataModule
from src.utils.config import build
from src.utils.errors import ConfigError
from src.utils.setting import Declared

log = logging.getLogger(__name__)
KINDS = ("generated", "early", "swapped", "replay")


class Corrupted(NamedTuple):
    """Corrupted windows with each one's weight in the loss, label (0: corrupted, 1: as good
    as real) and masked version (the mask character at the positions that were filled)."""

    texts: list[str]
    weights: list[float]
    labels: list[float]
    masked: list[str]


@dataclass(frozen=True)
class Fills:
    """How the generators fill a masked window: at one of `temperatures` (0: greedy) drawn
    per batch, the replayed policies at `replay_temperatures` (None: the same), with nucleus
    mass `top_p`, in `denoising_steps` as the GRPO sampler does."""

    temperatures: list[float]
    top_p: float = 1.0
    denoising_steps: int = 1
    replay_temperatures: list[float] | None = None


@dataclass(frozen=True)
class Masking:
    """How windows are masked afresh (`remask`, the datamodule's), the character shown at a
    masked position, and whether the judge is shown which characters were filled."""

    remask: Callable[[dict[str, Any], random.Random], dict[str, Any]]
    mask_char: str
    sees_mask: bool = False


class Corruptor:
    """Makes corrupted versions of windows, of the kinds in `weights` (kind -> share); a
    generated kind fills with one of its `generators`, drawn per batch, as `fills` says. With
    `masking.sees_mask`, swapped characters fall inside a fresh mask, which is what the judge
    is shown as filled."""

    def __init__(
        self,
        generators: dict[str, list[CharDiffusionNetwork]],
        fills: Fills,
        masking: Masking,
        weights: dict[str, float],
        max_swaps: int,
        worse_only: bool = False,
        better_as_real: bool = False,
    ) -> None:
        self.generators = generators
        self.temperatures = {kind: list(fills.temperatures) for kind in generators}
        if fills.replay_temperatures is not None:
            self.temperatures["replay"] = list(fills.replay_temperatures)
        self.top_p = fills.top_p
        self.denoising_steps = fills.denoising_steps
        self.remask = masking.remask
        self.mask_char = masking.mask_char
        self.sees_mask = masking.sees_mask
        self.infill = Infill(masking.mask_char)
        self.weights = {kind: share for kind, share in weights.items() if share > 0}
        self.max_swaps = max_swaps
        self.worse_only = worse_only
        self.better_as_real = better_as_real

    def corrupt(self, rows: list[dict[str, Any]], rng: random.Random) -> list[str]:
        """One corrupted window per row, each of a kind drawn by `weights`."""
        return self.corrupt_weighted(rows, rng)[0]

    def corrupt_weighted(self, rows: list[dict[str, Any]], rng: random.Random) -> Corrupted:
        """One corrupted window per row, each of a kind drawn by `weights`, with each one's
        weight in the loss, label and masked version (`made`)."""
        kinds = rng.choices(list(self.weights), list(self.weights.values()), k=len(rows))
        out = Corrupted([""] * len(rows), [1.0] * len(rows), [0.0] * len(rows), [""] * len(rows))
        for kind in self.weights:
            chosen = [i for i, k in enumerate(kinds) if k == kind]
            if chosen:
                made = self.made(kind, [rows[i] for i in chosen], rng)
                for j, i in enumerate(chosen):
                    for field, values in zip(out, made, strict=True):
                        field[i] = values[j]
        return out

    def make(self, kind: str, rows: list[dict[str, Any]], rng: random.Random) -> list[str]:
        """Windows of one kind of corruption, made from `rows`."""
        return self.made(kind, rows, rng)[0]

    def made(self, kind: str, rows: list[dict[str, Any]], rng: random.Random) -> Corrupted:
        """Windows of one kind of corruption, made from `rows`, with each one's weight in the
        loss, label (0: corrupted, 1: as good as real) and masked version. Every window is a
        negative of weight 1, but a fill is compared with the pretrained generator's greedy
        fill of the same masked window (how many masked characters each restores): with
        `worse_only` one restoring as many or more has weight 0, so the judge learns "worse
        than the generator" and a policy is not marked down for fills as good as the
        generator's; with `better_as_real` one restoring more is labelled 1, so the judge also
        learns what better fills look like."""
        if kind == "swapped":
            return self.swapped(rows, rng)
        masked = [self.remask(row, rng) for row in rows]
        temperature = rng.choice(self.temperatures[kind])
        sampler = CharDiffusionSampler(
            len(rows[0]["text"]), temperature or 1.0, self.top_p, self.denoising_steps
        )
        prompts = [row["masked"] for row in masked]
        generator = rng.choice(self.generators[kind])
        fills = sampler.sample(generator, prompts, 1, greedy=temperature == 0).completions
        texts = [
            self.infill.filled(row["masked"], fill) for row, fill in zip(masked, fills, strict=True)
        ]
        if not (self.worse_only or self.better_as_real):
            return Corrupted(texts, [1.0] * len(texts), [0.0] * len(texts), prompts)
        pretrained = self.generators["generated"][0]
        best = (  # the pretrained generator's greedy fills: those drawn, when they are
            fills
            if generator is pretrained and temperature == 0
            else sampler.sample(pretrained, prompts, 1, greedy=True).completions
        )
        weights, labels = [], []
        for fill, reference, row in zip(fills, best, masked, strict=True):
            mine, theirs = restored(fill, row["answer"]), restored(reference, row["answer"])
            better = self.better_as_real and mine > theirs
            weights.append(float(mine < theirs or better or not self.worse_only))
            labels.append(float(better))
        return Corrupted(texts, weights, labels, prompts)

    def swapped(self, rows: list[dict[str, Any]], rng: random.Random) -> Corrupted:
        """Windows with 1..max_swaps characters replaced by random ones: anywhere, or with
        `sees_mask` inside a fresh mask, which is then the masked version shown."""
        texts, masked = [], []
        for row in rows:
            count = rng.randint(1, self.max_swaps)
            if not self.sees_mask:
                texts.append(swapped(row["text"], count, rng))
                masked.append(row["text"])  # nothing marked: this judge is shown no mask
                continue
            prompt = self.remask(row, rng)["masked"]
            inside = [i for i, char in enumerate(prompt) if char == self.mask_char]
            texts.append(swapped(row["text"], count, rng, inside))
            masked.append(prompt)
        return Corrupted(texts, [1.0] * len(texts), [0.0] * len(texts), masked)

    def masks(self, rows: list[dict[str, Any]], rng: random.Random) -> list[str] | None:
        """Fresh masked versions of real windows for a judge that sees the mask, else None."""
        return [self.remask(row, rng)["masked"] for row in rows] if self.sees_mask else None


def char_targets(
    texts: list[str], originals: list[str], ids: Tensor, marks: Tensor, sees_mask: bool
) -> tuple[Tensor, Tensor]:
    """For windows `texts` encoded as `ids` [N, W] with filled positions `marks`: 1.0 where a
    character is its real window's (`originals`, one per text), and which characters count
    (1.0): the filled ones for a judge that sees the mask, else every character."""
    own = torch.zeros(ids.shape, dtype=torch.float32)
    for row, (text, original) in enumerate(zip(texts, originals, strict=True)):
        same = [float(a == b) for a, b in zip(text, original, strict=False)][: ids.size(1)]
        own[row, : len(same)] = torch.tensor(same)
    own = own.to(ids.device)
    counted = (marks > 0) if sees_mask else (ids != PAD)
    return own, counted.float()


def swapped(text: str, count: int, rng: random.Random, positions: list[int] | None = None) -> str:
    """`text` with `count` of `positions` (default: any) replaced by a different random
    character."""
    chars = list(text)
    allowed = range(len(chars)) if positions is None else positions
    for position in rng.sample(allowed, min(count, len(allowed))):
        chars[position] = rng.choice([c for c in ALPHABET if c != chars[position]])
    return "".join(chars)


@dataclass(frozen=True)
class Schedule:
    """How a stage's optimizer runs: `optimizer` (a partial over its settings) for
    `max_steps`, the learning rate warmed up linearly over `warmup_steps`, then decayed."""

    optimizer: Callable[..., torch.optim.Optimizer]
    max_steps: int
    warmup_steps: int


@dataclass(frozen=True)
class JudgeLoss:
    """The judge's loss: the window loss with weight `window_loss`, the character head's with
    `char_loss` (the real windows' characters too with `char_on_real`); metrics are named
    `<name>/...`."""

    name: str = "judge"
    char_loss: float = 0.0
    window_loss: float = 1.0
    char_on_real: bool = True


class JudgeModule(L.LightningModule):
    """Weighted binary cross-entropy of real (1) against corrupted windows, half and half; a
    corrupted window's weight and label (0, or 1 for a fill better than the generator's with
    `better_as_real`) come from `Corruptor.made`; that loss has weight `loss.window_loss`. A
    judge with a character head adds `loss.char_loss` times the binary cross-entropy of its
    characters (`char_targets`; the real windows' too with `loss.char_on_real`)."""

    def __init__(
        self,
        judge: CharJudge,
        corruptor: Corruptor,
        schedule: Schedule,
        seed: int,
        loss: JudgeLoss = JudgeLoss(),
    ) -> None:
        super().__init__()
        self.name = loss.name  # metric names: <name>/loss, <name>/val_accuracy_<kind>, ...
        self.judge = judge
        self.corruptor = corruptor
        self.optimizer_factory = schedule.optimizer
        self.max_steps = schedule.max_steps
        self.warmup_steps = schedule.warmup_steps
        self.seed = seed
        self.char_loss = float(loss.char_loss)
        self.window_loss = float(loss.window_loss)
        self.char_on_real = loss.char_on_real
        self.val_scores: dict[str, list[float]] = {}
        self.val_chars: dict[str, list[float]] = {}  # kind -> [right, counted]
        self.last_val: dict[str, float] = {}

    def configure_optimizers(self) -> Any:
        parameters = self.judge.parameters()
        return warmup_cosine(self.optimizer_factory, parameters, self.warmup_steps, self.max_steps)

    def training_step(self, batch: list[dict[str, Any]], batch_idx: int) -> Tensor:
        rng = random.Random(f"{self.seed}:{self.name}:{self.global_step}")
        corrupted = self.corruptor.corrupt_weighted(batch, rng)
        real = self.corruptor.masks(batch, rng)
        texts = [row["text"] for row in batch] + corrupted.texts
        masked = None if real is None else real + corrupted.masked
        labels = torch.tensor([1.0] * len(batch) + corrupted.labels, device=self.device)
        weights = torch.tensor([1.0] * len(batch) + corrupted.weights, device=self.device)
        ids, marks = self.judge.encode(texts, masked)
        logits, chars = self.judge.outputs(ids, marks)
        losses = torch.nn.functional.binary_cross_entropy_with_logits(
            logits, labels, reduction="none"
        )
        window_loss = (losses * weights).sum() / weights.sum()
        loss = self.window_loss * window_loss
        accuracy = (((logits > 0).float() == labels).float() * weights).sum() / weights.sum()
        if chars is not None:
            originals = [row["text"] for row in batch] * 2
            own, counted = char_targets(texts, originals, ids, marks, self.judge.sees_mask)
            if not self.char_on_real:
                counted[: len(batch)] = 0.0
            char_losses = torch.nn.functional.binary_cross_entropy_with_logits(
                chars, own, reduction="none"
            )
            char_loss = (char_losses * counted).sum() / counted.sum().clamp(min=1)
            loss = loss + self.char_loss * char_loss
            self.log(f"{self.name}/char_loss", char_loss)
            self.log(f"{self.name}/window_loss", window_loss)
        self.log(f"{self.name}/loss", loss, prog_bar=True)
        self.log(f"{self.name}/accuracy", accuracy)
        return loss

    def validation_step(self, batch: list[dict[str, Any]], batch_idx: int) -> None:
        rng = random.Random(f"{self.seed}:{self.name}-val:{batch_idx}")
        real = self.corruptor.masks(batch, rng)
        scored = {"real": ([row["text"] for row in batch], real)}
        for kind in self.corruptor.weights:
            made = self.corruptor.made(kind, batch, rng)
            scored[kind] = (made.texts, made.masked)  # a judge without the mask ignores them
        originals = [row["text"] for row in batch]
        for kind, (texts, masked) in scored.items():
            ids, marks = self.judge.encode(texts, masked)  # one pass scores and counts
            window, chars = self.judge.outputs(ids, marks)
            scores = self.judge.scored(ids, marks, window, chars)
            self.val_scores.setdefault(kind, []).extend(scores.tolist())
            if chars is not None:
                own, counted = char_targets(texts, originals, ids, marks, self.judge.sees_mask)
                self.count_chars(kind, chars, own, counted)

    def count_chars(self, kind: str, chars: Tensor, own: Tensor, counted: Tensor) -> None:
        """Add the counted characters the character head (logits `chars`) labels right
        (`own`: 1 where a character is the text's) to `val_chars`."""
        right = (((chars > 0).float() == own).float() * counted).sum().item()
        totals = self.val_chars.setdefault(kind, [0.0, 0.0])
        totals[0] += right
        totals[1] += counted.sum().item()

    def on_validation_epoch_end(self) -> None:
        scores, self.val_scores = self.val_scores, {}
        chars, self.val_chars = self.val_chars, {}
        if self.trainer.sanity_checking or not scores:
            return
        results = {}
        for kind, values in scores.items():
            right = [v > 0.5 if kind == "real" else v <= 0.5 for v in values]
            results[f"{self.name}/val_accuracy_{kind}"] = sum(right) / len(right)
            results[f"{self.name}/val_score_{kind}"] = sum(values) / len(values)
        for kind, (right_chars, counted) in chars.items():
            results[f"{self.name}/val_char_accuracy_{kind}"] = right_chars / max(counted, 1.0)
        self.last_val = results
        self.log_dict(results)


def train_judge(
    folder: Path,
    cfg: DictConfig,
    datamodule: CharWindowDataModule,
    loggers: list[Any],
    untrained: bool = False,
    **settings: Any,
) -> dict[str, Any]:
    """The judge stage (`stages.judge.train`, a partial over its settings): `settings` become
    a checked `JudgeTraining`, which trains the judge into `folder` (as initialised with
    `untrained`, a dry run). Returns what the stage did."""
    return (
        JudgeTraining.of(settings, "the judge stage")
        .checked()
        .run(folder, cfg, datamodule, loggers, untrained)
    )


def check_judge_training(settings: dict[str, Any], cfg: DictConfig) -> None:
    """What the judge stage would refuse in `settings` (`stages.judge.train`), refused before
    any stage trains (`stages.judge.settings_check`): a key it does not take, negatives none
    of which can be drawn, and a fresh judge's `model` that cannot be built (built here at
    its size, in milliseconds)."""
    training = JudgeTraining.of(settings, "the judge stage").checked()
    if not training.init and not training.from_generator:
        model = {**training.model, "char_head": training.char_loss > 0}
        window: CharWindowDataModule = build(cfg.data)  # its settings only: nothing is read yet
        CharJudge(max_length=window.window, **model)


@dataclass(frozen=True)
class JudgeTraining(Declared):
    """How a judge is trained (`stages.judge.train.*`, each key's comment in
    conf/task/char_diffusion.yaml): `model` its architecture, or `init`'s judge continued,
    against the generator of `cfg.generator_checkpoint`, its early snapshot and the generators
    saved in the `replay` folders (at `replay_temperatures`, or `temperatures` when None).
    With `worse_only`, a generated negative counts only when it restores fewer masked
    characters than the pretrained generator's greedy fill, and with `better_as_real` one
    restoring more is labelled real (`Corruptor.made`). With `from_generator` the judge's
    encoder starts as a copy of the generator's (`judge_from_generator`). With `char_loss`
    above 0 the judge has a character head, trained with that weight beside the window loss's
    `window_loss` (on the real windows' characters too with `char_on_real`). Metrics are named
    `<name>/...`."""

    SECTION = "stages.judge.train"
    TABLE = SETTINGS

    model: dict[str, Any]
    negatives: dict[str, float]
    temperatures: list[float]
    max_swaps: int
    max_steps: int
    batch_size: int
    optimizer: Callable[..., torch.optim.Optimizer]
    warmup_steps: int
    eval_every_n_steps: int
    replay: list[str] | None = None
    init: str | None = None
    name: str = "judge"
    replay_temperatures: list[float] | None = None
    worse_only: bool = False
    better_as_real: bool = False
    from_generator: bool = False
    char_loss: float = 0.0
    window_loss: float = 1.0
    char_on_real: bool = True

    def checked(self) -> JudgeTraining:
        """These settings, with a negative kind that cannot be drawn (replay without replay
        folders) left out; `ConfigError` naming the key for one that cannot work."""
        replay = list(self.replay or [])
        negatives = {
            kind: share for kind, share in self.negatives.items() if kind != "replay" or replay
        }
        unknown = set(negatives) - set(KINDS)
        if unknown or not any(share > 0 for share in negatives.values()):
            raise ConfigError(
                f"stages.judge.train.negatives must give positive shares to some of {KINDS}, "
                f"got {negatives}"
            )
        if not self.window_loss + self.char_loss > 0:
            raise ConfigError(
                f"stages.judge.train.window_loss must be above 0 unless "
                f"stages.judge.train.char_loss is, got {self.window_loss!r} and {self.char_loss!r}"
            )
        return replace(self, replay=replay, negatives=negatives)

    def run(
        self,
        folder: Path,
        cfg: DictConfig,
        datamodule: CharWindowDataModule,
        loggers: list[Any],
        untrained: bool,
    ) -> dict[str, Any]:
        """Train the judge and save it into `folder` (as initialised when `untrained`)."""
        torch.manual_seed(cfg.seed)
        judge = self.initial_judge(cfg, datamodule)
        if untrained:
            judge.save(folder)
            return {"steps": 0, "untrained": True}
        module = JudgeModule(
            judge,
            self.corruptor(cfg, datamodule, judge),
            Schedule(self.optimizer, self.max_steps, self.warmup_steps),
            cfg.seed,
            JudgeLoss(self.name, self.char_loss, self.window_loss, self.char_on_real),
        )
        log.info(
            "Char judge: %d steps against %s%s",
            self.max_steps,
            stage_checkpoint("generator", cfg),
            f" and {len(self.replay)} earlier rounds' policies" if self.replay else "",
        )
        steps = fit_stage(
            module,
            self.name,
            datamodule,
            loggers,
            cfg.trainer.accelerator,
            StageLength(self.max_steps, self.batch_size, self.eval_every_n_steps, cfg.seed + 1),
        )
        judge.save(folder)
        return {"steps": steps, **module.last_val}

    def initial_judge(self, cfg: DictConfig, datamodule: CharWindowDataModule) -> CharJudge:
        """The judge before training: `init`'s continued (its character head must fit
        `char_loss`), a copy of the generator's encoder, or a fresh one of `model`."""
        model = {**self.model, "char_head": self.char_loss > 0}
        if self.init:
            judge = load_char_judge(self.init).train().requires_grad_(True)
            if (judge.char_head is not None) != (self.char_loss > 0):
                raise ConfigError(
                    f"stages.judge.train.char_loss={self.char_loss} does not fit the judge "
                    f"continued from {self.init}, which "
                    f"{'has' if judge.char_head is not None else 'has no'} character head; "
                    "keep the char_loss it was trained with"
                )
            return judge
        if self.from_generator:
            return judge_from_generator(build(cfg.model), model)
        return CharJudge(max_length=datamodule.window, **model)

    def corruptor(
        self, cfg: DictConfig, datamodule: CharWindowDataModule, judge: CharJudge
    ) -> Corruptor:
        """What makes the judge's negatives: the pretrained generator, its early snapshot
        (the pretrained one where none was kept) and the replayed policies, drawn as GRPO's
        sampler draws."""
        pretrained = build(cfg.model).eval().requires_grad_(False)
        early = Path(stage_checkpoint("generator", cfg)) / EARLY
        generators = {
            "generated": [pretrained],
            "early": [frozen_generator(early) if early.is_dir() else pretrained],
            "replay": [frozen_generator(Path(policy)) for policy in self.replay or []],
        }
        sampler: CharDiffusionSampler = build(cfg.rollout)  # fills drawn as GRPO's sampler draws
        fills = Fills(
            self.temperatures, sampler.top_p, sampler.denoising_steps, self.replay_temperatures
        )
        masking = Masking(datamodule.remasked, datamodule.mask_char, judge.sees_mask)
        return Corruptor(
            generators,
            fills,
            masking,
            self.negatives,
            self.max_swaps,
            self.worse_only,
            self.better_as_real,
        )


def judge_from_generator(generator: CharDiffusionNetwork, model: dict[str, Any]) -> CharJudge:
    """A judge whose encoder is a copy of `generator`'s (its architecture and trained
    weights: what the generator knows of the text, as a reward model starts from the policy
    it will judge), with a fresh score head; `model` gives what the encoder does not fix
    (dropout, sees_mask)."""
    shape = {k: v for k, v in generator.settings.items() if k not in ("mask_char", "dropout")}
    rest = {k: v for k, v in model.items() if k not in shape}
    judge = CharJudge(**shape, **rest)
    judge.encoder.load_state_dict(generator.encoder.state_dict())
    return judge


def frozen_generator(folder: Path) -> CharDiffusionNetwork:
    """The generator saved in `folder`, frozen in eval mode, to fill negatives."""
    return load_char_diffusion(str(folder)).eval().requires_grad_(False)
