"""The rewriter's own settings (`policy.*` in conf/policy/rewriter.yaml): how the frozen planner
is asked, what is searched, and how the frozen generator answers. Read once from the config's
flat keys into one checked object, which the rewriter's methods read."""

from __future__ import annotations

from dataclasses import MISSING, dataclass, fields
from typing import Any

from src.utils.errors import ConfigError

QUERY_SOURCES = ("rewriter", "question", "question_options", "expanded", "expanded_options")
ANSWER_MODES = ("likelihood", "generate")


@dataclass(frozen=True)
class RewriterSettings:
    """Each field is the `policy.<field>` key of the same name; its comment in
    conf/policy/rewriter.yaml says what it does."""

    plan_template: str
    answer_template: str
    plan_cache_dir: str
    plan_model: str
    plan_prefix: str = ""
    document_template: str = "[{rank}] {title}: {content}"
    num_queries: int = 3
    query_k: int = 3
    k: int = 3
    rank_depth: int = 20
    answer_mode: str = "likelihood"
    query_source: str = "rewriter"
    frozen_batch_size: int = 16

    def __post_init__(self) -> None:
        if self.answer_mode not in ANSWER_MODES:
            raise ConfigError(
                f"policy.answer_mode must be one of {ANSWER_MODES}, got {self.answer_mode!r}"
            )
        if self.query_source not in QUERY_SOURCES:
            raise ConfigError(
                f"policy.query_source must be one of {QUERY_SOURCES}, got {self.query_source!r}"
            )
        for key in ("num_queries", "query_k", "k", "rank_depth", "frozen_batch_size"):
            if getattr(self, key) < 1:
                raise ConfigError(f"policy.{key} must be >= 1, got {getattr(self, key)}")
        object.__setattr__(self, "plan_prefix", self.plan_prefix or "")

    @classmethod
    def taken_from(cls, keys: dict[str, Any]) -> RewriterSettings:
        """The settings among `keys`, removed from it (what is left is the generator's prompt
        settings); a missing required key is named."""
        mine = {f.name: keys.pop(f.name) for f in fields(cls) if f.name in keys}
        missing = [
            f.name
            for f in fields(cls)
            if f.name not in mine and f.default is MISSING and f.default_factory is MISSING
        ]
        if missing:
            raise ConfigError(f"policy=rewriter needs policy.{missing[0]}; set it in the config")
        return cls(**mine)
