"""The LightningDataModule every recipe uses: rows of dicts in, batches of rows out."""

from __future__ import annotations

import logging
import random
from collections.abc import Callable, Iterator
from typing import Any

import lightning as L
import torch
from torch.utils.data import DataLoader, Dataset, Sampler

from src.data.data_settings import DataSettings
from src.data.files import DataFileError, read_rows, require_fields
from src.data.learnability import (
    DRAW_KEY,
    ROW_KEY,
    Learnability,
    SamplingSettings,
    learnability_batches,
)
from src.data.mcq import blank, clean_rows, is_mcq_row, shuffle_options
from src.utils.distributed import rank, world_size
from src.utils.errors import ConfigError

log = logging.getLogger(__name__)
SPLITS = ("validation", "train", "unseen")  # what `split_rows` (and `eval.split`) can name
KIND = "subject"  # the canonical row's field naming a question's kind (MedQA's `meta_info`)


def keep_rows(batch: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Collate function: a batch is the list of its rows, untouched."""
    return batch


class StepSampler(Sampler[list[int]]):
    """Batches of row indices, `num_batches` per pass over the data, in an order that depends
    only on the seed and the pass, so a resumed run can start at any batch of any pass.

    A pass is one Lightning epoch; Lightning calls `set_epoch` before each. Within a pass the
    rows come as whole random permutations, as torch's `RandomSampler` draws them.
    `batch_size` is the global batch: on several processes each takes its own contiguous
    share of every batch (rank r the r-th), read from the process group when iterated, so
    the processes together see exactly the batches one process would.

    With `numbered`, each index comes as `(row, draw)`: `draw` numbers the draw within the
    whole run (pass and position), so whatever a dataset does per draw is as reproducible as
    the order, resumed runs included. With `learnability` the batches are drawn by it instead
    of from permutations (src/data/learnability.py), always numbered."""

    def __init__(
        self,
        num_rows: int,
        batch_size: int,
        num_batches: int,
        seed: int,
        numbered: bool = False,
        learnability: Learnability | None = None,
    ) -> None:
        self.num_rows = num_rows
        self.batch_size = batch_size
        self.num_batches = num_batches
        self.seed = seed
        self.numbered = numbered or learnability is not None
        self.learnability = learnability
        self.epoch = 0
        self.start_batch = 0  # the next pass starts here (set when resuming), then from 0

    def set_epoch(self, epoch: int) -> None:
        if epoch != self.epoch:
            self.epoch, self.start_batch = epoch, 0

    def resume_at(self, epoch: int, batch: int) -> None:
        """Make the next pass the `epoch`-th one, starting after its first `batch` batches."""
        self.epoch, self.start_batch = epoch, batch

    def __len__(self) -> int:
        return self.num_batches

    def __iter__(self) -> Iterator[list[int] | list[tuple[int, int]]]:
        if self.learnability is not None:
            start, self.start_batch = self.start_batch, 0
            share, first = process_share(self.batch_size)
            passed = self.epoch * self.num_batches  # batches of earlier passes
            yield from learnability_batches(
                self.learnability,
                passed + start,
                passed + self.num_batches,
                self.seed,
                share,
                first,
            )
            return
        # Pass 0 draws exactly what RandomSampler(generator=manual_seed(seed)) would.
        generator = torch.Generator().manual_seed(self.seed + 1_000_003 * self.epoch)
        order: list[int] = []
        while len(order) < self.num_batches * self.batch_size:
            order += torch.randperm(self.num_rows, generator=generator).tolist()
        start, self.start_batch = self.start_batch, 0
        share, first = process_share(self.batch_size)
        drawn_before = self.epoch * self.num_batches * self.batch_size  # draws of earlier passes
        for batch in range(start, self.num_batches):
            offset = batch * self.batch_size + first
            rows = order[offset : offset + share]
            if self.numbered:
                yield [(row, drawn_before + offset + i) for i, row in enumerate(rows)]
            else:
                yield rows


def process_share(batch_size: int) -> tuple[int, int]:
    """How many rows of a global batch of `batch_size` this process takes, and from where."""
    processes = world_size()
    if batch_size % processes:
        raise ConfigError(
            f"data.batch_size={batch_size} does not split over {processes} processes; "
            f"make it a multiple of {processes}"
        )
    share = batch_size // processes
    return share, rank() * share


class ShardedBatches(Sampler[list[int]]):
    """Held-out batches for this process: rows rank, rank + W, ... (W processes), cut into the
    same number of batches on every process (at most `batch_size` rows each), so scores
    gathered over the processes cover every row exactly once."""

    def __init__(self, num_rows: int, batch_size: int) -> None:
        self.num_rows = num_rows
        self.batch_size = batch_size

    def _batches(self) -> list[list[int]]:
        processes = world_size()
        if self.num_rows < processes:
            raise ConfigError(
                f"{self.num_rows} held-out rows cannot be shared by {processes} processes; "
                "raise data.val_size"
            )
        mine = list(range(rank(), self.num_rows, processes))
        longest = -(-self.num_rows // processes)
        count = -(-longest // self.batch_size)
        size, extra = divmod(len(mine), count)
        batches, start = [], 0
        for i in range(count):
            end = start + size + (1 if i < extra else 0)
            batches.append(mine[start:end])
            start = end
        return batches

    def __len__(self) -> int:
        return len(self._batches())

    def __iter__(self) -> Iterator[list[int]]:
        yield from self._batches()


class DrawnRows(Dataset):
    """Training rows as drawn, each draw treated by what depends only on the seed and the
    draw's number (`StepSampler(numbered=True)`): with `deal_options` a multiple-choice row's
    options are dealt to the letters afresh; with `oracle_share` that share of the draws is
    marked `oracle: True`, whose search a searcher answers with the row's gold passage
    (`Searcher.search`). The two use separate random streams: a share leaves the deal as it was.
    With `tagged` each drawn row carries its index and its draw's number (`ROW_KEY`,
    `DRAW_KEY`), which learnability sampling reads back from the groups sampled for it."""

    def __init__(
        self,
        rows: list[dict[str, Any]],
        seed: int,
        deal_options: bool = False,
        oracle_share: float = 0.0,
        tagged: bool = False,
    ) -> None:
        self.rows = rows
        self.seed = seed
        self.deal_options = deal_options
        self.oracle_share = oracle_share
        self.tagged = tagged

    def __len__(self) -> int:
        return len(self.rows)

    def __getitem__(self, key: tuple[int, int]) -> dict[str, Any]:
        index, draw = key
        row = self.rows[index]
        if self.deal_options:
            row = shuffle_options(row, random.Random(f"{self.seed}:{draw}"))
        if self.oracle_share > 0:
            oracle = random.Random(f"{self.seed}:{draw}:oracle").random() < self.oracle_share
            row = {**row, "oracle": oracle}
        if self.tagged:
            row = {**row, ROW_KEY: index, DRAW_KEY: draw}
        return row


def step_loader(
    rows: list[dict[str, Any]],
    batch_size: int,
    num_batches: int,
    seed: int,
    deal_options: bool = False,
    oracle_share: float = 0.0,
    learnability: Learnability | None = None,
) -> DataLoader:
    """`num_batches` random batches of rows in one pass, so a progress bar counts steps;
    `batch_size` rows per step over all processes together. With `deal_options` every drawn
    multiple-choice row comes with its options in a new order, and with `oracle_share` that
    share of the draws is marked `oracle` (`DrawnRows`); with `learnability` the batches are
    drawn by it and every row is tagged with its index and draw."""
    tagged = learnability is not None
    per_draw = deal_options or oracle_share > 0 or tagged
    order = StepSampler(len(rows), batch_size, num_batches, seed, per_draw, learnability)
    dataset = DrawnRows(rows, seed, deal_options, oracle_share, tagged) if per_draw else rows
    return DataLoader(dataset, batch_sampler=order, collate_fn=keep_rows)


def held_out_loader(rows: list[dict[str, Any]], batch_size: int) -> DataLoader:
    """Held-out rows in order, each scored once over all processes; `batch_size` per process."""
    return DataLoader(
        rows, batch_sampler=ShardedBatches(len(rows), batch_size), collate_fn=keep_rows
    )


class PromptDataModule(L.LightningDataModule):
    """Train and held-out rows from a built-in source or a local file.

    `path` (a local JSON/JSONL/Parquet file) takes precedence over `source`; `val_path` gives
    a separate held-out file, otherwise the source's own validation split or, failing that,
    the first `val_size` rows after a seeded shuffle are held out (at most `max_val_rows`
    of them are scored). `schema`, when given, turns every raw row into the recipe's
    canonical row, dropping incomplete rows (counted in `report`) and stopping at wrong ones. Training batches are drawn at random for
    `num_batches` steps, so the progress bar counts optimizer steps rather than epochs; each
    holds `rounds_per_step` batches of `batch_size` prompts, the later ones the reserve that
    dynamic sampling (`algo.sampling_rounds`) draws from. With `shuffle_options` every drawn
    training row (multiple-choice rows only) has its options dealt to the letters in a new
    order, so no answer position pays; held-out rows keep the file's order. With
    `oracle_share` that share of the drawn training rows is marked `oracle` (a searcher reads
    their gold passage whatever it searched: `Searcher.search`); held-out rows never are.
    `unseen` (`{path, corpus, kinds}`) adds a second held-out split: rows of kinds (`KIND`)
    never trained on, from their own file (`path`) or taken out of the data by kind (`kinds`:
    neither training nor held out, then), searched by a retrieving role in their own `corpus`
    (the run builds that role), scored beside the held-out rows at every evaluation; a kind
    found in both the training rows and these is refused.
    """

    def __init__(
        self,
        source: Callable[[], Any] | None = None,
        schema: Callable[[dict[str, Any]], dict[str, Any]] | None = None,
        **keys: Any,
    ) -> None:
        """`keys`: the `data.*` keys, read into `self.settings` (`DataSettings`, checked
        there); `source` and `schema` are the built parts the config names."""
        super().__init__()
        self.settings = DataSettings.of(keys, type(self).__name__)
        if source is None and self.settings.path is None:
            raise ConfigError("data needs either a built-in source or data.path")
        self.source = source
        self.schema = schema
        self.num_batches = self.settings.num_batches  # the run's length may set it (runs/length.py)
        self.unseen_rows: list[dict[str, Any]] = []
        self.train_rows: list[dict[str, Any]] = []
        self.val_rows: list[dict[str, Any]] = []
        self.report: dict[str, Any] = {}
        self.resume_position: tuple[int, int] | None = None  # (pass, batch) from a checkpoint
        self.learnability: Learnability | None = None  # with learnability sampling

    @classmethod
    def more_keys(cls) -> set[str]:
        """The `data.*` keys its settings object reads (`DataSettings`), beyond its named
        parameters (the settings check's `runs/read_keys.py`)."""
        return DataSettings.more_keys()

    def _file_rows(self, path: str) -> list[dict[str, Any]]:
        rows = read_rows(path)
        require_fields(rows, self.settings.required_fields, str(path))
        return rows

    def _clean(self, rows: list[dict[str, Any]], split: str, source: str) -> list[dict[str, Any]]:
        """Apply the schema and note what was kept and dropped for this split."""
        if self.schema is None:
            kept, dropped = rows, {}
        else:
            kept, dropped = clean_rows(rows, self.schema, source)
        self.report[split] = {"rows": len(rows), "kept": len(kept), "dropped": dropped}
        if rows and not kept:  # the cause, not what a too-small remainder would suggest
            reasons = ", ".join(f"{count} {reason}" for reason, count in dropped.items())
            raise DataFileError(
                f"{source}: every one of its {len(rows)} rows was dropped ({reasons}); "
                "give rows in the data's schema"
            )
        return kept

    def _raw_splits(self) -> tuple[list[dict[str, Any]], list[dict[str, Any]] | None, str]:
        """Training rows, held-out rows if the source has them, and a name for the source."""
        if self.settings.path is not None:
            return self._file_rows(self.settings.path), None, str(self.settings.path)
        loaded = self.source()
        if isinstance(loaded, dict):
            source = str(loaded.get("source", "built-in data source"))
            if "all" in loaded:
                return loaded["all"], None, source
            return loaded["train"], loaded.get("validation"), source
        return loaded, None, "built-in data source"

    def prepare_rows(self) -> None:
        """Load, clean and split the rows once; safe to call again."""
        if self.train_rows:
            return
        rows, val_rows, source_name = self._raw_splits()
        if val_rows is None and self.settings.val_path is not None:
            val_rows = self._file_rows(self.settings.val_path)
        self.report = {"source": source_name}
        unseen: list[dict[str, Any]] = []
        if val_rows is not None:
            train_rows = self._clean(rows, "train", source_name)
            val_rows = self._clean(val_rows, "validation", self.settings.val_path or source_name)
            train_rows, unseen = self._take_kinds(train_rows, source_name)
            val_rows, unseen_val = self._take_kinds(val_rows, source_name, required=False)
            unseen += unseen_val
        else:
            rows = self._clean(rows, "all", source_name)
            rows, unseen = self._take_kinds(rows, source_name)
            if self.settings.path is not None or self.schema is not None:
                rows = list(rows)
                random.Random(self.settings.seed).shuffle(rows)
            val_rows, train_rows = rows[: self.settings.val_size], rows[self.settings.val_size :]
        if not train_rows:
            raise DataFileError(
                f"{source_name}: no training rows left after holding out {len(val_rows)} "
                f"(data.val_size={self.settings.val_size}); lower data.val_size or add rows"
            )
        if not val_rows:
            raise DataFileError(
                f"{source_name}: the held-out split is empty; set data.val_size > 0"
            )
        if self.settings.shuffle_options and not all(is_mcq_row(row) for row in train_rows):
            raise ConfigError(
                f"data.shuffle_options=true needs multiple-choice rows (options and a gold letter); "
                f"{source_name} has other rows: set data.shuffle_options=false"
            )
        if self.settings.max_val_rows is not None:
            val_rows = val_rows[: self.settings.max_val_rows]
        self.train_rows, self.val_rows = train_rows, val_rows
        self.report.update(train_rows=len(train_rows), val_rows=len(val_rows))
        log.info("Data: %d training rows, %d held-out rows", len(train_rows), len(val_rows))
        if self.settings.unseen_path is not None:
            self.unseen_rows = self._unseen_rows(self.settings.unseen_path, train_rows)
        elif unseen:
            self.unseen_rows = unseen[: self.settings.max_val_rows or len(unseen)]
            self.report["unseen_rows"] = len(self.unseen_rows)
            log.info(
                "Data: %d unseen rows of kinds %s, never trained on",
                len(self.unseen_rows),
                ", ".join(self.settings.unseen_kinds),
            )

    def _take_kinds(
        self, rows: list[dict[str, Any]], source: str, required: bool = True
    ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        """`rows` without the kinds of `data.unseen.kinds`, and those rows (the unseen split);
        a kind no row has is refused (where `required`), naming the kinds there are."""
        wanted = set(self.settings.unseen_kinds)
        if not wanted:
            return rows, []
        if not kinds(rows):  # e.g. a GSM8K file given to a task whose unseen split is a kind
            log.warning(
                "%s: its rows name no kind (%r), so data.unseen.kinds %s takes none out: "
                "no unseen split",
                source,
                KIND,
                sorted(wanted),
            )
            return rows, []
        missing = sorted(wanted - kinds(rows))
        if missing == sorted(wanted):  # e.g. a task's unseen subjects, and a file of other ones
            log.warning(
                "%s: none of its rows is of the kinds data.unseen.kinds names (%s), so there is "
                "no unseen split; its kinds: %s",
                source,
                ", ".join(missing),
                ", ".join(sorted(kinds(rows))),
            )
            return rows, []
        if missing and required:
            raise DataFileError(
                f"{source}: data.unseen.kinds names {missing}, which no row's {KIND!r} holds; "
                f"its kinds: {', '.join(sorted(kinds(rows))) or 'none'}"
            )
        taken = [row for row in rows if str(row.get(KIND)) in wanted]
        return [row for row in rows if str(row.get(KIND)) not in wanted], taken

    def _unseen_rows(self, path: str, train_rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """The unseen split's rows from `path`, cleaned and capped as the held-out rows are;
        none may share a kind with the training rows."""
        rows = self._clean(self._file_rows(path), "unseen", path)
        if not rows:
            raise DataFileError(f"{path}: data.unseen.path holds no rows")
        shared = sorted(kinds(rows) & kinds(train_rows))
        if shared:
            raise DataFileError(
                f"{path}: kinds {shared} are also in the training rows; the unseen split "
                "(data.unseen.path) holds kinds never trained on: move them to one file"
            )
        if not kinds(rows):
            log.warning("%s: its rows name no kind (%r); cannot check they are unseen", path, KIND)
        rows = (
            rows[: self.settings.max_val_rows] if self.settings.max_val_rows is not None else rows
        )
        self.report["unseen_rows"] = len(rows)
        log.info("Data: %d unseen rows (kinds never trained on) from %s", len(rows), path)
        return rows

    def drop_rows_without(self, needs: dict[str, str]) -> None:
        """Drop the rows where a field in `needs` (field -> the reward that needs it) is empty,
        counted in the report under `unscorable.<split>.<field>`; fails when a split empties."""
        unscorable: dict[str, dict[str, int]] = {}
        for split in ("train", "val", "unseen"):
            kept = getattr(self, f"{split}_rows")
            if split == "unseen" and not kept:
                continue  # no unseen split
            for field, user in needs.items():
                before, kept = len(kept), [row for row in kept if not blank(row.get(field))]
                if len(kept) < before:
                    unscorable.setdefault(split, {})[field] = before - len(kept)
                    log.warning(
                        "%s: dropped %d %s rows without %r, which reward %s needs",
                        self.report.get("source"),
                        before - len(kept),
                        split,
                        field,
                        user,
                    )
            if not kept:
                raise DataFileError(
                    f"{self.report.get('source')}: no {split} rows left, none has the fields the "
                    f"reward needs ({needs}); give rows with them or choose another reward"
                )
            setattr(self, f"{split}_rows", kept)
        if unscorable:
            self.report["unscorable"] = unscorable
            self.report.update(train_rows=len(self.train_rows), val_rows=len(self.val_rows))

    def split_rows(self, split: str) -> list[dict[str, Any]]:
        """The rows of one of `SPLITS`: the held-out rows (`validation`) or the training rows."""
        if split not in SPLITS:
            raise ConfigError(f"eval.split must be one of {', '.join(SPLITS)}, got {split!r}")
        if split == "unseen" and not self.unseen_rows:
            raise ConfigError(
                "eval.split=unseen needs data.unseen.path (rows of kinds never trained on)"
            )
        return {"validation": self.val_rows, "unseen": self.unseen_rows}.get(split, self.train_rows)

    def setup(self, stage: str | None = None) -> None:
        self.prepare_rows()

    def draw_by_learnability(self, settings: SamplingSettings, success: str) -> None:
        """Draw the training prompts by learnability (src/data/learnability.py), each group's
        success read from the reward function `success`; the run's loop reports the groups
        through `observe_rollout`. The rows are loaded and checked by then (`prepare_rows`,
        `drop_rows_without`), so each training row has its estimate from here on."""
        self.prepare_rows()
        rows = len(self.train_rows)
        self.learnability = Learnability(rows, self.rows_per_step, settings, success)

    @property
    def rows_per_step(self) -> int:
        """Training rows drawn a step: the step's batch, then the reserve dynamic sampling
        draws from."""
        return self.settings.batch_size * self.settings.rounds_per_step

    def observe_rollout(
        self, rows: list[dict[str, Any]], parts: dict[str, torch.Tensor], group_size: int
    ) -> dict[str, float]:
        """The groups a rollout sampled (`RolloutFeedback`): noted by learnability sampling,
        which returns its `sampling/*` figures; {} when prompts are drawn uniformly."""
        if self.learnability is None:
            return {}
        return self.learnability.observe(rows, parts, group_size)

    def train_dataloader(self) -> DataLoader:
        settings = self.settings
        loader = step_loader(
            self.train_rows,
            self.rows_per_step,
            self.num_batches,
            settings.seed,
            settings.shuffle_options,
            settings.oracle_share,
            self.learnability,
        )
        if self.resume_position is not None:
            loader.batch_sampler.resume_at(*self.resume_position)
            self.resume_position = None
        return loader

    def state_dict(self) -> dict[str, Any]:
        """The training position saved in checkpoints: the pass and how many of its batches
        were trained on, and with learnability sampling its estimates, so a resumed run draws
        the batches an uninterrupted one would."""
        trainer = self.trainer
        if trainer is None:
            return {}
        progress = trainer.fit_loop.epoch_loop.batch_progress.current
        state = {"epoch": trainer.current_epoch, "batches": progress.processed}
        if self.learnability is not None:  # the estimates the next draws are made from
            state["learnability"] = self.learnability.state_dict()
        return state

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        if state_dict:
            self.resume_position = (int(state_dict["epoch"]), int(state_dict["batches"]))
            if self.learnability is not None:
                self.learnability.load_state_dict(state_dict.get("learnability") or {})

    def held_out_splits(self) -> list[str]:
        """The held-out splits `val_dataloader` returns, in its order."""
        return ["validation", "unseen"] if self.unseen_rows else ["validation"]

    def val_dataloader(self) -> DataLoader | list[DataLoader]:
        loaders = [
            held_out_loader(self.split_rows(split), self.settings.eval_batch_size)
            for split in self.held_out_splits()
        ]
        return loaders[0] if len(loaders) == 1 else loaders


def kinds(rows: list[dict[str, Any]]) -> set[str]:
    """The question kinds (`KIND`) the rows name."""
    return {str(row[KIND]) for row in rows if row.get(KIND)}
