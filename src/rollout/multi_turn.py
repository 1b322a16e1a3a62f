"""A rollout in turns (Search-R1's): a completion may search by writing
`<search>QUERY</search>`; the row pauses at the closing tag, the tool's answer is inserted as
`<information>...</information>`, and the row goes on from there, until `</answer>`, its EOS,
its searches or its token budget run out, or it writes one of the sampler's stop texts
(`rollout.stop_strings`, ending it as its answer does).

    prompt --G rows, one read of the prompt--> turn 1 ... </search>
           --tool(QUERY)--> <information>passages</information>   (inserted: context, no action)
           --that row alone--> turn 2 ... </answer>

The sampler's log-probs of the tokens the policy drew are kept across the turns
(`Rollout.sampler_logps`, 0 on inserted tokens), where the turn sampler reports them. The
inserted tokens are marked in `Rollout.inserted_mask`: the policy's log-probs are taken with
them in context, and the loss never counts them. `max_completion_length` bounds the tokens the
policy writes, over all its turns; the inserted ones come on top.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

import torch
from torch import Tensor

from src.model.network import DecodedNetwork
from src.model.steps import RowContexts
from src.rollout.decode import Drawn, Stop
from src.rollout.rollout import Rollout, pad_rows
from src.rollout.stops import first_mark, stop_at_marks


class Tool(Protocol):
    """What a search calls: the text to insert after each query (a retriever's passages in
    their tags)."""

    def __call__(self, queries: list[str], prompts: list[str]) -> list[str]:
        """One text per query, in order, inserted as it is; `prompts[i]` is the prompt query
        i's completion continues, so that a tool may write what was asked into its text."""
        ...


@runtime_checkable
class TurnSampler(Protocol):
    """A sampler that draws tokens after token prompts (`HFSampler`): what each turn runs."""

    temperature: float  # sampling temperature; log-probs are taken at the same one
    max_completion_length: int  # tokens the policy writes per completion, all turns together
    stop_strings: list[str]  # texts a completion ends at (rollout.stop_strings), as an answer does

    def new_tokens(
        self,
        lm: DecodedNetwork,
        input_ids: Tensor,
        attention_mask: Tensor,
        group_size: int,
        max_new_tokens: int,
        greedy: bool = False,
        stop: Stop | None = None,
    ) -> Drawn:
        """[B * G, <= max_new_tokens] tokens after each left-padded prompt, pad after EOS or
        where `stop` ends a row (it may also draw on: the caller cuts at the stop text), and
        the sampler's log-probs of them where it reports them."""
        ...

    def new_tokens_after(
        self,
        lm: DecodedNetwork,
        contexts: RowContexts,
        max_new_tokens: int,
        greedy: bool = False,
        stop: Stop | None = None,
    ) -> Drawn:
        """[R, <= max_new_tokens] tokens after each row's context (its prompt, shared with
        the rows of its group, then its own turns and inserted passages), as `new_tokens`
        draws them after whole prompts: a later turn."""
        ...

    def sync(self, lm: DecodedNetwork) -> None:
        """Make the next samples come from the network's current weights."""
        ...


@dataclass(frozen=True)
class Tags:
    """How a completion searches and answers (what a search inserts is the tool's text)."""

    search_open: str = "<search>"
    search_close: str = "</search>"  # a row pauses here and its query is searched
    answer_close: str = "</answer>"  # a row ends here
    # a turn that may still search and has written this many tokens without a mark is searched
    # as it stands, its closing tag inserted before the tool's text; None: no such limit
    max_query_tokens: int | None = None


@dataclass
class Row:
    """One completion being written: its tokens so far, which of them were inserted, and its
    state."""

    tokens: list[int] = field(default_factory=list)
    # the sampler's log-prob of each token (0 for inserted ones); None once a turn reported none
    log_probs: list[float] | None = field(default_factory=list)
    inserted: list[int] = field(default_factory=list)
    written: int = 0  # tokens the policy wrote
    searches: int = 0
    query: str | None = None  # the query waiting for the tool
    cut_query: bool = False  # the query was cut at `Tags.max_query_tokens`: its tag is inserted
    done: bool = False
    clipped: bool = False  # ended by the token budget, no EOS or answer


def query_of(turn_text: str, tags: Tags) -> str:
    """The query of a turn that ends in `tags.search_close` (or was cut at the query's token
    limit): after the last opening tag (the whole turn where there is none), whitespace
    trimmed."""
    before = turn_text.split(tags.search_close, 1)[0]
    if tags.search_open in before:
        before = before[before.rindex(tags.search_open) + len(tags.search_open) :]
    return before.strip()


class MultiTurnSampler:
    """A `Sampler` whose completions may search (module docstring): `turns` draws each turn's
    tokens, `tool` answers the queries, at most `max_searches` searches per completion (a
    closing tag after that is plain text)."""

    def __init__(
        self, turns: TurnSampler, tool: Tool, max_searches: int = 2, tags: Tags | None = None
    ) -> None:
        self.turns = turns
        self.tool = tool
        self.max_searches = max_searches
        self.tags = tags or Tags()
        self.temperature = turns.temperature
        self.max_completion_length = turns.max_completion_length

    def sync(self, lm: DecodedNetwork) -> None:
        """What the turn sampler does after an optimizer step."""
        self.turns.sync(lm)

    @torch.no_grad()
    def sample(
        self, lm: DecodedNetwork, prompts: list[str], group_size: int, greedy: bool = False
    ) -> Rollout:
        """G completions for each prompt, each in as many turns as its searches; the first
        turn reads each prompt once for its G rows, a later one each row's own tokens after
        its prompt (read once for its rows where the turn sampler can)."""
        encoded = lm.encode_prompts(prompts)
        prompt_ids = encoded["input_ids"].repeat_interleave(group_size, dim=0)
        prompt_mask = encoded["attention_mask"].repeat_interleave(group_size, dim=0)
        budget = self.max_completion_length
        rows = [Row() for _ in range(prompt_ids.size(0))]
        drawn = self.turns.new_tokens(
            lm,
            encoded["input_ids"],
            encoded["attention_mask"],
            group_size,
            budget,
            greedy,
            self._stop(lm, rows),
        )
        self._take(lm, rows, list(range(len(rows))), drawn)
        while waiting := [i for i, row in enumerate(rows) if row.query is not None]:
            answers = self.tool(
                [rows[i].query or "" for i in waiting], [prompts[i // group_size] for i in waiting]
            )
            for i, text in zip(waiting, answers, strict=True):
                row = rows[i]
                if row.cut_query:  # the closing tag the row did not write comes with the text
                    text = self.tags.search_close + text
                inserted = lm.tokenizer(text, add_special_tokens=False)["input_ids"]
                row.tokens += inserted
                row.inserted += [1] * len(inserted)
                if row.log_probs is not None:  # the policy drew none of them: never counted
                    row.log_probs += [0.0] * len(inserted)
                row.query, row.cut_query = None, False
                if row.written >= budget:
                    row.done, row.clipped = True, True
            going = [i for i in waiting if not rows[i].done]
            if not going:
                break
            contexts = RowContexts(
                encoded["input_ids"],
                encoded["attention_mask"],
                [i // group_size for i in going],
                [rows[i].tokens for i in going],
            )
            room = max(budget - rows[i].written for i in going)
            stop = self._stop(lm, [rows[i] for i in going])
            drawn = self.turns.new_tokens_after(lm, contexts, room, greedy, stop)
            self._take(lm, rows, going, drawn)
        return self._rollout(lm, rows, prompt_ids, prompt_mask)

    def _marks(self, row: Row) -> list[str]:
        """Where the row's turn ends: its answer's end and the sampler's stop texts
        (`rollout.stop_strings`), and its query's end while it may still search."""
        marks = [self.tags.answer_close, *self.turns.stop_strings]
        if row.searches < self.max_searches:
            marks.append(self.tags.search_close)
        return marks

    def _stop(self, lm: DecodedNetwork, rows: list[Row]) -> Stop:
        """The decoding of a turn of `rows` ends each row at its marks (`stop_at_marks`), and a
        row that may still search at `Tags.max_query_tokens` tokens."""
        at_marks = stop_at_marks(lm.tokenizer, [self._marks(row) for row in rows])
        limit = self.tags.max_query_tokens
        if limit is None:
            return at_marks
        searching = torch.tensor([row.searches < self.max_searches for row in rows])

        def stopped(drawn: Tensor, going: Tensor) -> Tensor:
            ends = at_marks(drawn, going)
            if drawn.size(1) >= limit:
                ends = ends | searching.to(ends.device)
            return ends

        return stopped

    def _take(self, lm: DecodedNetwork, rows: list[Row], which: list[int], drawn: Drawn) -> None:
        """Add each row's new turn (row `which[j]` drew `drawn[j]`): up to its EOS, its budget,
        its answer's end (then it is done) or its query's end (then it waits for the tool). Where
        the two ends are one text (a line's end), it is the query's while the row may search.
        A row that may search and writes `Tags.max_query_tokens` tokens before any mark or EOS
        waits for the tool with those tokens as its query."""
        eos = set(lm.eos_token_ids)
        limit = self.tags.max_query_tokens
        for j, i in enumerate(which):
            row = rows[i]
            tokens = drawn.tokens[j].tolist()[: self.max_completion_length - row.written]
            ended = next((k for k, token in enumerate(tokens) if token in eos), None)
            if ended is not None:
                tokens = tokens[: ended + 1]
            cut, mark = first_mark(lm.tokenizer, tokens, self._marks(row))
            row.cut_query = (
                limit is not None
                and row.searches < self.max_searches
                and (cut > limit or (cut == limit and mark is None and ended is None))
            )
            if row.cut_query:
                cut, mark = limit, self.tags.search_close
            tokens = tokens[:cut]
            row.tokens += tokens
            if drawn.log_probs is None or row.log_probs is None:
                row.log_probs = None
            else:
                row.log_probs += drawn.log_probs[j, : len(tokens)].tolist()
            row.inserted += [0] * len(tokens)
            row.written += len(tokens)
            if mark == self.tags.search_close and row.searches < self.max_searches:
                text = lm.tokenizer.decode(tokens, skip_special_tokens=True)
                row.query = query_of(text, self.tags)
                row.searches += 1
            else:
                row.done = True
                row.clipped = mark is None and ended is None

    def _rollout(
        self, lm: DecodedNetwork, rows: list[Row], prompt_ids: Tensor, prompt_mask: Tensor
    ) -> Rollout:
        """The rows as one rollout: completions right-padded, the inserted tokens marked."""
        width = max(1, max(len(row.tokens) for row in rows))
        ids = pad_rows([row.tokens for row in rows], width, lm.tokenizer.pad_token_id, torch.long)
        mask = pad_rows([[1] * len(row.tokens) for row in rows], width, 0, torch.long)
        inserted = pad_rows([row.inserted for row in rows], width, 0, torch.long)
        device = prompt_ids.device
        reported = [row.log_probs for row in rows]
        log_probs = None
        if all(row is not None for row in reported):
            log_probs = pad_rows(reported, width, 0.0, torch.float32).to(device)
        return Rollout(
            prompt_ids=prompt_ids,
            prompt_mask=prompt_mask,
            completion_ids=ids.to(device),
            completion_mask=mask.to(device),
            is_clipped=torch.tensor([row.clipped for row in rows], device=device),
            completions=lm.tokenizer.batch_decode(ids, skip_special_tokens=True),
            inserted_mask=inserted.to(device),
            sampler_logps=log_probs,
        )
