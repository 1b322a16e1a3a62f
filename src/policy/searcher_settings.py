"""The searcher's own settings (`policy.*` in conf/policy/searcher.yaml): what is searched, how
the passages are written in, the tags of a completion's turns and the frozen reader. Built once
from the config's keys and checked against their declaration (`src/policy/keys.py`); the
searcher's methods read the fields."""

from __future__ import annotations

from dataclasses import dataclass

from src.policy.keys import SETTINGS
from src.utils.errors import ConfigError
from src.utils.setting import Declared


@dataclass(frozen=True)
class SearcherSettings(Declared):
    """Each field is the `policy.<field>` key of the same name; its comment in
    conf/policy/searcher.yaml says what it does. `rank_depth` is at least `k` where it is
    used (`PassageTool`)."""

    SECTION = "policy"
    TABLE = SETTINGS

    k: int = 3
    max_searches: int = 2
    passage_template: str = "[{rank}] {title}: {content}"
    search_open: str = "<search>"
    search_close: str = "</search>"
    answer_open: str = "<answer>"
    answer_close: str = "</answer>"
    information: str = "\n<information>{text}</information>\n"
    search_question_first: bool = False
    answer_as: str = "letter"
    query_template: str = "{query}"
    rank_depth: int = 1
    reader_template: str | None = None
    frozen_batch_size: int = 16
    max_query_tokens: int | None = None

    def __post_init__(self) -> None:
        super().__post_init__()
        for key, field, where in (
            ("information", "{text}", "where the passages go"),
            ("query_template", "{query}", "where the policy's query goes"),
            (
                "reader_template",
                "{passages}",
                "where the passages read go (null: no frozen reader)",
            ),
        ):
            value = getattr(self, key)
            if value is not None and field not in value:
                raise ConfigError(f"policy.{key} must hold {field}, {where}; got {value!r}")
