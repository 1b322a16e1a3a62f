"""The searcher role (Search-R1): one policy reasons, searches when it decides to, reads what
comes back and answers, in one multi-turn completion.

    question + options --policy--> ... <search>QUERY</search>
                       --retriever--> <information>top k passages</information>  (not actions)
                       --policy--> ... <answer>B</answer>

The run samples it with `src.rollout.multi_turn.MultiTurnSampler` (the role is a
`SearchingRole`); the outcome the reward scores is the letter inside the last `<answer>` tag.
"""

from __future__ import annotations

import re
from collections import OrderedDict
from typing import Any

from src.model.network import AdaptedNetwork, PolicyNetwork
from src.policy.generator import Generator
from src.policy.query_terms import query_shape
from src.policy.rewriter import (
    first_letter,
    gold_index,
    gold_reciprocal_rank,
    option_probability,
    options_after,
)
from src.policy.role import Outcomes
from src.policy.searcher_settings import SearcherSettings
from src.retrieval.retriever import Retriever
from src.retrieval.tool import PassageTool
from src.rollout.multi_turn import Tags, Tool, query_of
from src.utils.recent import keep_recent

REMEMBERED_PROMPTS = 4096  # the prompts whose rows a search can still read


class Searcher(Generator):
    """Prompts from `template` (the generator's settings), a search tool over `retriever`'s top
    `k` passages per query, at most `max_searches` searches per completion, and `tags`
    (`search_open`, `search_close`, `answer_open`, `answer_close`): its settings
    (`SearcherSettings`, `self.settings`).

    What the tool searches is `query_template` filled with the row's fields and the policy's
    `{query}` ('{question} {query}' searches the question followed by what the policy wrote),
    and what it inserts is `information` filled with the row's fields and the passages'
    `{text}` (it may show the options after the passages, which the prompt then leaves out).
    `rank_depth` hits per search (at least `k`) place the gold passage for `gold_reciprocal_rank`.

    With a `reader_template`, the base model (adapter off) reads the passages each completion's
    last search inserted, as a frozen reader would, and its probability of the gold option is
    the completion's `gold_probability` (`reward=gold_probability`): a score of the search
    alone, whatever the policy then answers.
    """

    def __init__(self, retriever: Retriever, **keys: Any) -> None:
        """`keys`: the `policy.*` keys; those of `SearcherSettings` become `self.settings`
        (checked there), the rest are the generator's prompt settings."""
        self.settings = SearcherSettings.taken_from(keys)
        super().__init__(**keys)
        settings = self.settings
        self.max_searches = settings.max_searches
        self.tags = Tags(
            settings.search_open,
            settings.search_close,
            settings.answer_close,
            settings.max_query_tokens,
        )
        self.tool = PassageTool(
            retriever, settings.k, settings.passage_template, depth=settings.rank_depth
        )
        self.asked: OrderedDict[str, dict[str, Any]] = OrderedDict()  # prompt -> its row

    @classmethod
    def more_keys(cls) -> set[str]:
        """The `policy.*` keys its settings object reads (`SearcherSettings`), beyond the named
        parameters of its and the generator's `__init__` (the settings check's
        `runs/read_keys.py`)."""
        return SearcherSettings.more_keys()

    def prepare(self, network: PolicyNetwork, rows: list[dict[str, Any]]) -> dict[str, float]:
        """With `search_question_first`, each row's passages for its question, once (what
        plain retrieval-augmented generation reads); nothing otherwise."""
        if not self.settings.search_question_first:
            return {}
        todo = [row for row in rows if "question_passages" not in row]
        texts = self.tool([str(row["question"]) for row in todo]) if todo else []
        for row, text in zip(todo, texts, strict=True):
            row["question_passages"] = text
        return {}

    def prompts(self, rows: list[dict[str, Any]], tokenizer: Any = None) -> list[str]:
        """The generator's prompts; with `search_question_first` each ends with a search for
        the question, as if the policy had written it, and its passages (plain RAG)."""
        prompts = super().prompts(rows, tokenizer)
        if self.settings.search_question_first:
            tags, prefix = self.tags, self.response_prefix
            prompts = [
                prompt[: len(prompt) - len(prefix)]  # the search comes before the response prefix
                + f"{tags.search_open}{row['question']}{tags.search_close}"
                + self.inserted(row["question_passages"], row)
                + prefix
                for prompt, row in zip(prompts, rows, strict=True)
            ]
        for prompt, row in zip(prompts, rows, strict=True):
            keep_recent(self.asked, prompt, row, REMEMBERED_PROMPTS)
        return prompts

    def search_tool(self) -> Tool:
        """What a search inserts: `information` around the retriever's top `k` passages for
        the query `searched` makes of the policy's; the role's own, so that `outcomes` can
        name the passages each search inserted."""
        return self.search

    def search(self, queries: list[str], prompts: list[str]) -> list[str]:
        """The text inserted after each query, the row its prompt was made from filling the
        templates (a prompt `prompts` did not make has no fields; two rows that make one
        prompt, the same question drawn twice with its options in two orders, share the
        later one's fields). A row marked `oracle` (a training draw, `data.oracle_share`) reads
        the passage holding its gold answer among the query's other top hits, `k` in all, in
        place of what the query found (RAFT's oracle context: the answer turn learns to read
        it, and to tell it from the rest where `k` is over 1); the query is still searched and
        ranked, so `gold_rank` pays the search as ever."""
        rows = [self.asked.get(prompt, {}) for prompt in prompts]
        searched = [self.searched(q, row) for q, row in zip(queries, rows, strict=True)]
        texts = self.tool(searched)
        gold = {  # each marked answer's passage looked up once, not once per completion
            answer: self.tool.holding(answer)
            for answer in {str(row.get("answer_text", "")) for row in rows if row.get("oracle")}
        }
        for i, row in enumerate(rows):
            passage = gold.get(str(row.get("answer_text", ""))) if row.get("oracle") else None
            if passage is not None:
                texts[i] = self.tool.among(searched[i], passage)
        return [self.inserted(text, row) for text, row in zip(texts, rows, strict=True)]

    def searched(self, query: str, row: dict[str, Any]) -> str:
        """What the tool searches for the policy's `query` on `row`: `query_template` filled."""
        return self._fill(
            self.settings.query_template, {**row, "query": query}, "query_template"
        ).strip()

    def inserted(self, passages: str, row: dict[str, Any]) -> str:
        """`information` with the row's fields and the passages' text filled in."""
        before, after = self.information_around(row)
        return before + passages + after

    def information_around(self, row: dict[str, Any]) -> tuple[str, str]:
        """The inserted text before and after the passages, the row's fields filled in."""
        before, _, after = self.settings.information.partition("{text}")
        return self._fill(before, row, "information"), self._fill(after, row, "information")

    def outcomes(
        self,
        completions: list[str],
        rows: list[dict[str, Any]],
        network: AdaptedNetwork | None = None,
    ) -> Outcomes:
        """The letter of each completion's last answer ('' without one), and its searches:
        how many, whether it searched at all, their queries (each the query the sampler
        searched: `query_of` its turn), whether the passages it read hold the row's gold answer
        text, the reciprocal rank of the best hit that holds it among each search's top
        `rank_depth` (the passages read where that is under `k`), its title included as read
        (`gold_reciprocal_rank`: 1 at the top of a search's passages, 0 where none holds it:
        what `reward=gold_rank` pays), whether its answer names one of the options
        (`named_option`: what `reward=named_option` pays), and its turns (`turn_details`). With a
        `reader_template`, also the frozen reader's probability of the gold option after the
        last passages read (`gold_probability`, 0 where nothing was read)."""
        texts, details, last_read = [], [], []
        for completion, row in zip(completions, rows, strict=True):
            turns = self.turns(self.response_prefix + completion, row)
            written = "".join(text for kind, text in turns if kind == "written")
            read = [text for kind, text in turns if kind == "information"]
            if self.settings.search_question_first:
                read.insert(0, str(row.get("question_passages", "")))
            last_read.append(read[-1] if read else None)
            gold = str(row.get("answer_text", "")).strip().lower()
            texts.append(self.answer_letter(written, row.get("options") or {}))
            turn_details = self.turn_details(turns, row)
            queries = [turn["query"] for turn in turn_details if "query" in turn]
            asked_first = [str(row["question"])] if self.settings.search_question_first else []
            ranked = [hits for hits in map(self.tool.hits_of, asked_first + queries) if hits]
            details.append(
                {
                    "searches": float(len(read)),
                    "searched": float(bool(read)),
                    "queries": queries,
                    "gold_in_information": float(
                        bool(gold) and any(gold in t.lower() for t in read)
                    ),
                    "gold_reciprocal_rank": gold_reciprocal_rank(ranked, gold, with_title=True),
                    "named_option": float(bool(texts[-1])),
                    "turns": turn_details,
                    **query_shape(queries),
                }
            )
            if "oracle" in row:  # a training draw of a run with data.oracle_share
                details[-1]["oracle"] = float(bool(row["oracle"]))
        if self.settings.reader_template is not None:
            for detail, chance in zip(
                details, self.gold_chances(last_read, rows, network), strict=True
            ):
                detail["gold_probability"] = chance
        return Outcomes(texts=texts, details=details)

    def gold_chances(
        self,
        passages: list[str | None],
        rows: list[dict[str, Any]],
        network: AdaptedNetwork | None,
    ) -> list[float]:
        """For each completion, the base model's probability (adapter off) of the row's gold
        option after `reader_template` filled with the row's fields and the `passages` it read:
        the softmax of the options' texts scored as continuations (`option_probability`). 0
        where nothing was read or the row names no gold letter."""
        if network is None:
            raise ValueError("policy.reader_template: the frozen reader needs the network")
        asked = [
            i
            for i, (read, row) in enumerate(zip(passages, rows, strict=True))
            if read is not None and gold_index(row) >= 0
        ]
        contexts = [
            self._fill(
                self.settings.reader_template,
                {**rows[i], "passages": passages[i]},
                "reader_template",
            )
            for i in asked
        ]
        scores = options_after(
            network, contexts, [rows[i] for i in asked], self.settings.frozen_batch_size
        )
        chances = [0.0] * len(rows)
        for i, row_scores in zip(asked, scores, strict=True):
            chances[i] = option_probability(row_scores, gold_index(rows[i]))
        return chances

    def turns(self, completion: str, row: dict[str, Any] | None = None) -> list[tuple[str, str]]:
        """The completion cut into what the policy wrote and what was inserted, in order:
        ("written", text) and ("information", passages) pairs; `row` fills `information`."""
        before, after = self.information_around(row or {})
        pattern = re.compile(re.escape(before) + r"(.*?)" + re.escape(after), re.DOTALL)
        parts, at = [], 0
        for match in pattern.finditer(completion):
            parts.append(("written", completion[at : match.start()]))
            parts.append(("information", match.group(1)))
            at = match.end()
        parts.append(("written", completion[at:]))
        return [(kind, text) for kind, text in parts if text or kind == "information"]

    def turn_details(
        self, turns: list[tuple[str, str]], row: dict[str, Any] | None = None
    ) -> list[dict[str, Any]]:
        """What the samples table shows of each turn: what the policy wrote, and where that
        ended in a search, the query the tool searched (`searched`, `row` filling it) and the
        ids of the passages inserted (None where the tool no longer remembers them). The first
        turn starts with the response prefix, which is prompt, not completion: the sampler
        searches what follows it, and so is its query here (a prefix `<search>Textbook terms:`
        searches the terms without those two words)."""
        details: list[dict[str, Any]] = []
        prefix = self.response_prefix
        following_turns = [*turns[1:], None][: len(turns)]  # none for an empty completion
        for at, ((kind, text), following) in enumerate(zip(turns, following_turns, strict=True)):
            if kind != "written":
                continue
            turn: dict[str, Any] = {"wrote": text}
            if following is not None and self.tags.search_close in text:
                sampled = text[len(prefix) :] if at == 0 and text.startswith(prefix) else text
                query = self.searched(query_of(sampled, self.tags), row or {})
                turn.update(query=query, passages=self.tool.ids_of(query))
            details.append(turn)
        return details

    def answer_letter(self, written: str, options: dict[str, str]) -> str:
        """The letter of the last answer tag's option, or '': with `answer_as` 'letter' the
        letter written there; with 'option' the option whose text it holds (the longest, where
        one option's text holds another's), so that a bare letter answers nothing."""
        pattern = (
            re.escape(self.settings.answer_open) + r"(.*?)" + re.escape(self.tags.answer_close)
        )
        answers = re.findall(pattern, written, re.DOTALL)
        if not answers:
            return ""
        if self.settings.answer_as == "letter":
            return first_letter(answers[-1])
        return option_named(answers[-1], options)


def option_named(answer: str, options: dict[str, str]) -> str:
    """The letter of the one option whose text `answer` holds (case and spacing aside); '' where
    it holds none, or several that are not part of one another, so that listing the options
    answers nothing. An option's text inside another named option's text ('vitamin B' in
    'vitamin B12') is not counted as named on its own."""
    said = " ".join(answer.lower().split())
    texts = {letter: " ".join(str(text).lower().split()) for letter, text in options.items()}
    named = {letter: text for letter, text in texts.items() if text and text in said}
    alone = [
        letter
        for letter, text in named.items()
        if not any(text != other and text in other for other in named.values())
    ]
    return alone[0] if len(alone) == 1 else ""  # one text under two letters: both stay
