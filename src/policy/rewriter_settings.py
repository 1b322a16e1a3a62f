"""The rewriter's own settings (`policy.*` in conf/policy/rewriter.yaml): how the frozen planner
is asked, what is searched, and how the frozen generator answers. Read once from the config's
flat keys into one object, checked against their declaration (`src/policy/keys.py`), which the
rewriter's methods read."""

from __future__ import annotations

from dataclasses import dataclass

from src.policy.keys import SETTINGS
from src.utils.setting import Declared


@dataclass(frozen=True)
class RewriterSettings(Declared):
    """Each field is the `policy.<field>` key of the same name; its comment in
    conf/policy/rewriter.yaml says what it does."""

    SECTION = "policy"
    TABLE = SETTINGS
    NEEDED_BY = "policy=rewriter"

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
        object.__setattr__(self, "plan_prefix", self.plan_prefix or "")
        super().__post_init__()
