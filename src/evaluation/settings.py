"""The evaluation's settings (`eval.*`, conf/eval/) and the sampled room's (`room.*`,
conf/room/): built once from the config's keys by `runs/parts.py`, right after the settings
check, and checked against their declaration (`src/evaluation/keys.py`); `src.eval`,
`src.preflight` and the learnability draw read the fields, never the config."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from omegaconf import DictConfig, OmegaConf

from src.data.datamodule import SPLITS
from src.evaluation.keys import SETTINGS
from src.utils.config import build
from src.utils.errors import ConfigError
from src.utils.setting import Declared


@dataclass(frozen=True)
class EvalSettings(Declared):
    """Each field is the `eval.<field>` key of the same name; its comment in
    conf/eval/default.yaml says what it does."""

    SECTION = "eval"
    TABLE = SETTINGS

    heads: tuple[str, ...] = ("base", "sft", "grpo")
    adapters: dict[str, str | None] = field(default_factory=dict)
    policy_overrides: dict[str, dict[str, Any]] = field(default_factory=dict)
    split: str = "validation"
    max_rows: int | None = None
    oracle: bool = False
    batch_size: int = 64
    output_dir: str | None = None
    extract: dict[str, Any] | None = None
    # the heads whose folder is the config's default (an interpolation such as the pipeline's
    # stage folder): skipped while not trained, where a folder the user gave must exist
    default_adapters: tuple[str, ...] = ()

    @classmethod
    def of_section(cls, node: DictConfig | None, part: str = "src.eval") -> EvalSettings:
        """The settings of the config's `eval` section, with the heads whose folder is an
        interpolation (None: the defaults)."""
        settings = super().of_section(node, part)
        adapters = {} if node is None else node.get("adapters") or {}
        defaults = tuple(h for h in adapters if OmegaConf.is_interpolation(adapters, h))
        return replace(settings, default_adapters=defaults)

    def __post_init__(self) -> None:
        super().__post_init__()  # a bare text for heads is refused here, not split
        object.__setattr__(self, "heads", tuple(self.heads or ()))
        object.__setattr__(self, "adapters", dict(self.adapters or {}))
        object.__setattr__(self, "policy_overrides", dict(self.policy_overrides or {}))

    def extractor(self) -> Any:
        """How an answer is read out of an outcome (`eval.extract` built; None: the outcome
        is the answer)."""
        return build(self.extract) if self.extract else None


@dataclass(frozen=True)
class RoomSettings(Declared):
    """Each field is the `room.<field>` key of the same name; its comment in
    conf/room/default.yaml says what it does. `splits` names splits the data module has."""

    SECTION = "room"
    TABLE = SETTINGS

    k: int = 16
    rows: int = 32
    splits: tuple[str, ...] = ("train", "validation", "unseen")
    success: str | None = "auto"
    form: str | None = "auto"
    batch_size: int = 4
    in_training: bool = True
    in_eval: bool = True
    eval_rows: int | None = 64
    seed: int = 0

    def __post_init__(self) -> None:
        super().__post_init__()
        object.__setattr__(self, "splits", tuple(self.splits or ()))
        unknown = [split for split in self.splits if split not in SPLITS]
        if unknown:
            raise ConfigError(f"room.splits names {unknown}: choose among {', '.join(SPLITS)}")
