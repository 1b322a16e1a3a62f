"""The data's settings (`data.*` in conf/data/): which rows are read, how many are held out and
how they are batched. Built once from the config's keys and checked against their declaration
(`src/data/keys.py`; `num_batches` and `rounds_per_step`, which follow trainer.max_steps and
algo.sampling_rounds, as those keys are checked); the datamodule reads the fields."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from src.data.keys import SETTINGS
from src.utils.errors import ConfigError
from src.utils.setting import Declared

UNSEEN_KEYS = ("path", "corpus", "kinds")  # what data.unseen may hold


@dataclass(frozen=True)
class DataSettings(Declared):
    """Each field is the `data.<field>` key of the same name; its comment in conf/data/*.yaml
    says what it does. `unseen` is `{path, corpus, kinds}` or empty (no unseen split). `num_batches`
    and `rounds_per_step` follow `trainer.max_steps` and `algo.sampling_rounds`, which are
    checked under their own names."""

    SECTION = "data"
    TABLE = SETTINGS

    path: str | None = None
    val_path: str | None = None
    required_fields: tuple[str, ...] = ("question", "answer")
    val_size: int = 256
    max_val_rows: int | None = None
    batch_size: int = 16
    eval_batch_size: int = 64
    num_batches: int | None = 1000
    seed: int = 0
    rounds_per_step: int = 1
    shuffle_options: bool = False
    oracle_share: float = 0.0
    unseen: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.unseen is not None and not isinstance(self.unseen, Mapping):
            raise ConfigError(
                f"data.unseen must hold its keys ({', '.join(UNSEEN_KEYS)}), got "
                f"{self.unseen!r}: write data.unseen.path=FILE for a file of unseen rows"
            )
        object.__setattr__(self, "required_fields", tuple(self.required_fields or ()))
        object.__setattr__(self, "unseen", dict(self.unseen or {}))
        super().__post_init__()
        unknown = sorted(set(self.unseen) - set(UNSEEN_KEYS))
        if unknown:
            raise ConfigError(
                f"data.unseen: unknown key(s) {unknown}; known: {', '.join(UNSEEN_KEYS)}"
            )
        if self.unseen.get("path") is not None and self.unseen.get("kinds"):
            raise ConfigError(
                "data.unseen: give its rows as a file (path) or as kinds taken out of the data "
                "(kinds), not both: set the other to null"
            )

    @property
    def unseen_path(self) -> str | None:
        """The unseen split's file (None: no unseen split)."""
        return self.unseen.get("path")

    @property
    def unseen_kinds(self) -> tuple[str, ...]:
        """Kinds whose rows are taken out of the data into the unseen split (empty: none)."""
        kinds = self.unseen.get("kinds") or ()
        return (kinds,) if isinstance(kinds, str) else tuple(str(kind) for kind in kinds)

    @property
    def unseen_corpus(self) -> str | None:
        """The textbook the unseen split's rows are searched in."""
        return self.unseen.get("corpus")
