"""What a policy role provides (generator, rewriter, reader), declared once."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from src.model.network import PolicyNetwork
from src.rollout.multi_turn import Tags, Tool


@dataclass
class Outcomes:
    """What the reward scores for each completion, and what the role did to get there."""

    texts: list[str]  # one per completion: what the reward functions score
    details: list[dict[str, Any]] = field(default_factory=list)  # per completion, e.g. queries,
    # retrieved ids, the frozen answer; numeric values are logged as role/<key> means

    def __post_init__(self) -> None:
        if not self.details:
            self.details = [{} for _ in self.texts]


class Role(Protocol):
    """Turns data rows into prompts for the trained network, and its completions into the
    outcomes the reward scores; names the completion a supervised warm start teaches."""

    def prepare(self, network: PolicyNetwork, rows: list[dict[str, Any]]) -> dict[str, float]:
        """Once before rows are used (training, evaluation, a dry run): work that depends only on
        the rows and the frozen network, written into the rows (a rewriter's plans, a reader's
        passages). Returns figures worth logging (cache hits, seconds); {} when there is none."""
        ...

    def prompts(self, rows: list[dict[str, Any]], tokenizer: Any = None) -> list[str]:
        """One prompt text per row (the tokenizer supplies a chat template when used)."""
        ...

    def outcomes(
        self, completions: list[str], rows: list[dict[str, Any]], network: PolicyNetwork
    ) -> Outcomes:
        """What the reward scores for each completion; `rows` are aligned with `completions`.
        `network` produced them: a role may run its frozen base (adapter off) on them."""
        ...

    def sft_targets(self, rows: list[dict[str, Any]]) -> list[str]:
        """The completion a supervised warm start teaches for each row."""
        ...

    def reads_completions(self) -> bool:
        """Whether `outcomes` reads the completions. A role that does not (the rewriter's
        question-only baseline searches with the question itself) is given empty ones,
        nothing sampled."""
        ...


@runtime_checkable
class SearchingRole(Role, Protocol):
    """A role whose completions may search in turns (`policy=searcher`): the run samples it
    with `src.rollout.multi_turn.MultiTurnSampler` around the configured sampler."""

    max_searches: int  # searches per completion at most
    tags: Tags  # how a completion searches and answers, how the passages are inserted

    def search_tool(self) -> Tool:
        """What a search calls: the text to insert for each query."""
        ...
