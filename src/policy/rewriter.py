"""The rewriter role: a trained adapter writes search queries; the frozen base plans before
training, and answers from the documents the queries retrieve; the answer is the outcome.

    question + options --frozen planner--> plan (once, cached on disk)
    question + options + plan --trained rewriter--> up to `num_queries` queries
    queries --retriever--> each query's top `query_k`, merged to `k` documents
    documents + question + options --frozen generator--> the answer letter (the outcome)
"""

from __future__ import annotations

import logging
import math
import re
import string
import time
from dataclasses import fields
from typing import Any

from src.data.mcq import LETTERS
from src.model.network import AdaptedNetwork
from src.model.prompt_start import added_bos
from src.policy.frozen import frozen_generate, frozen_option_scores
from src.policy.generator import Generator
from src.policy.plans import PlanCache, read_plan
from src.policy.queries import parse_queries
from src.policy.query_terms import query_shape
from src.policy.rewriter_settings import RewriterSettings
from src.policy.role import Outcomes
from src.retrieval.hit import Hit, documents_text, holds, merge_hits
from src.retrieval.retriever import Retriever
from src.rollout.sampler import Sampler
from src.utils.errors import ConfigError
from src.utils.progress import progress_steps
from src.utils.timing import phase

log = logging.getLogger(__name__)
NO_SFT_TARGET = (  # a warm start asked for with nothing to teach
    "policy=rewriter has no gold queries to teach: set policy.sft_target (for example "
    "' {question}', the question as the query) or sft.enabled=false"
)


class Rewriter(Generator):
    """Trains the query rewriter of a retrieve-then-answer pipeline whose other parts are frozen.

    The prompt pattern (`template`, chat template, few-shot `examples`, `response_prefix`) is the
    generator's, over the row's fields plus `plan`. `answer_mode` says how the frozen generator
    answers: `likelihood` picks the option whose text is likeliest after the documents and the
    question (robust for small models), `generate` writes greedily and the first option letter
    in its text is the answer. `query_source` says what is searched: `rewriter`, each of the
    rewriter's queries, their hits merged; `question`, the question itself and nothing sampled
    (the no-rewriter baseline of `python -m src.eval`); `expanded`, one search with the question
    followed by the rewriter's queries (query expansion: the rewriter adds words to the question,
    and a completion with no readable query searches with the question alone);
    `question_options`, the question followed by its options' texts and nothing sampled (the
    second baseline of `python -m src.eval`); `expanded_options`, one search with the question,
    its options' texts, then the rewriter's queries (the options name the candidates, the
    rewriter's words say which one the findings fit). `reader` is the frozen generator's own model
    (another network than the policy's, as the original recipe's generator is); without one
    the policy's base, adapter off, answers. Each completion's detail says whether its query
    copies the question (`copies_question`) and names an option (`names_option`), so that a
    trained rewriter that only repeats the question shows as one.
    """

    def __init__(
        self,
        retriever: Retriever,
        planner: Sampler,
        answerer: Sampler,
        reader: AdaptedNetwork | None = None,
        **keys: Any,
    ) -> None:
        """`keys` are the config's flat `policy.*` keys: the rewriter's own are read once into
        `self.settings` (`RewriterSettings`, checked there), the rest are the generator's
        prompt settings."""
        keys.setdefault("sft_target", "")  # no answer to teach as a query
        self.settings = RewriterSettings.taken_from(keys)
        super().__init__(**keys)
        self.retriever = retriever
        self.planner = planner
        self.answerer = answerer
        self.reader = reader  # the frozen generator's own model; None: the policy's base

    # ----------------------------------------------------------------------------- plans
    def prepare(self, network: AdaptedNetwork, rows: list[dict[str, Any]]) -> dict[str, float]:
        """Give every row its `plan`: from the cache, or from the frozen planner in batches (then
        cached). Returns the cache hits, the plans generated, those not JSON, and the seconds.
        Where neither the rewriter's prompt nor the generator's reads `{plan}`, nothing is
        planned and every plan is empty."""
        started = time.perf_counter()
        if not self.reads_plans():
            log.info("No prompt reads {plan}: the frozen planner is not asked")
            for row in rows:
                row["plan"] = ""
            return {"planner/generated": 0.0, "timing/planner": time.perf_counter() - started}
        chat = self._uses_chat(network.tokenizer)  # the planner is asked as the rewriter is
        # how the prompt is framed is part of what the plans depend on, so of the cache's name
        framing = (
            f"{self.settings.plan_template}\x00chat={chat}\x00prefix={self.settings.plan_prefix}"
        )
        if added_bos(network.tokenizer) is not None:  # its prompts start with a BOS (Gemma)
            framing += "\x00bos"
        cache = PlanCache(self.settings.plan_cache_dir, self.settings.plan_model, framing)
        questions = [self._fill(self.settings.plan_template, row, "plan_template") for row in rows]
        missing = list(dict.fromkeys(q for q in questions if cache.get(q) is None))
        hits = len(questions) - sum(cache.get(q) is None for q in questions)
        if missing:
            log.info("Planning %d questions with the frozen planner", len(missing))
            for start in progress_steps(
                range(0, len(missing), self.settings.frozen_batch_size), "plans"
            ):
                batch = missing[start : start + self.settings.frozen_batch_size]
                prompts = [self._plan_prompt(network.tokenizer, text, chat) for text in batch]
                texts = frozen_generate(
                    network, self.planner, prompts, self.settings.frozen_batch_size
                )
                plans = [self.settings.plan_prefix + text for text in texts]
                cache.add(dict(zip(batch, plans, strict=True)))  # kept if the run stops
        not_json = 0
        for row, question in zip(rows, questions, strict=True):
            row["plan"], is_json = read_plan(cache.get(question) or "")
            not_json += not is_json
        seconds = time.perf_counter() - started
        log.info(
            "Plans: %d of %d from the cache (%s), %d generated, %d not JSON (used as text), %.1f s",
            hits,
            len(rows),
            cache.path,
            len(missing),
            not_json,
            seconds,
        )
        if not_json:
            log.warning(
                "%d of %d plans are not JSON; the rewriter sees their text as the plan",
                not_json,
                len(rows),
            )
        return {
            "planner/cache_hits": float(hits),
            "planner/generated": float(len(missing)),
            "planner/not_json": float(not_json),
            "timing/planner": seconds,
        }

    def reads_plans(self) -> bool:
        """Whether `template` or `answer_template` names the field `plan`."""
        return any(
            name == "plan"
            for pattern in (self.template, self.settings.answer_template)
            for _, name, _, _ in string.Formatter().parse(pattern)
        )

    @classmethod
    def more_keys(cls) -> set[str]:
        """The `policy.*` keys its settings object reads (`RewriterSettings`), beyond the named
        parameters of its and the generator's `__init__` (the settings check's
        `runs/read_keys.py`)."""
        return {field.name for field in fields(RewriterSettings)}

    def reads_completions(self) -> bool:
        """The queries come from the completions, except where the source is the question
        (alone or with its options)."""
        return self.settings.query_source not in ("question", "question_options")

    def _plan_prompt(self, tokenizer: Any, text: str, chat: bool) -> str:
        """The planner's prompt for a filled `plan_template`: one user turn of the chat
        template (an instruct model answers its own turn, not the text's continuation), or
        the text alone; then `plan_prefix`, the start of the plan it is made to continue."""
        if chat:
            messages = [{"role": "user", "content": text}]
            text = tokenizer.apply_chat_template(
                messages, tokenize=False, add_generation_prompt=True
            )
        return text + self.settings.plan_prefix

    def sft_targets(self, rows: list[dict[str, Any]]) -> list[str]:
        """The query a warm start teaches, `policy.sft_target` over the row's fields (there
        are no gold queries: `" {question}"` teaches the question itself as the query, a
        start as good as the question alone that GRPO then rewrites)."""
        if not self.sft_target.strip():
            raise ConfigError(NO_SFT_TARGET)
        return super().sft_targets(rows)

    # ----------------------------------------------------------------------------- outcomes
    def outcomes(
        self, completions: list[str], rows: list[dict[str, Any]], network: AdaptedNetwork
    ) -> Outcomes:
        """Queries from each completion, documents for them, and the frozen generator's answer
        letter from those documents; a completion with no readable query gets no documents
        and the empty answer (a reward of 0), never an error."""
        queries = [
            self.queries(completion, row) for completion, row in zip(completions, rows, strict=True)
        ]
        with phase("retrieval"):
            documents, ranked = self.retrieve(
                [self.searches(asked, row) for asked, row in zip(queries, rows, strict=True)]
            )
        answerable = [i for i, found in enumerate(documents) if found]
        letters = [""] * len(completions)
        chances: list[float | None] = [0.0] * len(completions)  # no documents, no answer
        with phase("frozen_generation"):
            answers, probabilities = self.answer(
                [rows[i] for i in answerable], [documents[i] for i in answerable], network
            )
        for i, letter, chance in zip(answerable, answers, probabilities, strict=True):
            letters[i], chances[i] = letter, chance
        details = []
        for row, asked, found, deep, letter, chance in zip(
            rows, queries, documents, ranked, letters, chances, strict=True
        ):
            gold_text = str(row.get("answer_text") or "").lower()
            detail = {
                "queries": asked,
                "documents": [hit.document.id for hit in found],
                "titles": [hit.document.title for hit in found],
                "answer": letter,
                "num_queries": len(asked),
                "no_queries": not asked,
                "gold_retrieved": bool(gold_text)
                and any(gold_text in hit.document.content.lower() for hit in found),
                "gold_reciprocal_rank": gold_reciprocal_rank(deep, gold_text),
                "copies_question": bool(asked)
                and all(copies_question(query, str(row["question"])) for query in asked),
                "names_option": any(names_option(query, row) for query in asked),
                **query_shape(asked),
            }
            if self.settings.answer_mode == "likelihood":
                detail["gold_probability"] = chance
            details.append(detail)
        return Outcomes(letters, details)

    def queries(self, completion: str, row: dict[str, Any]) -> list[str]:
        """The queries a completion asks (or the question, alone or followed by its options'
        texts, where `query_source` says so)."""
        if self.settings.query_source == "question":
            return [str(row["question"])]
        if self.settings.query_source == "question_options":
            return [with_options(row)]
        return parse_queries(self.response_prefix + completion, self.settings.num_queries)

    def searches(self, queries: list[str], row: dict[str, Any]) -> list[str]:
        """What is searched for a completion's queries: the queries themselves, or with
        `query_source=expanded` one search, the question followed by them, and with
        `expanded_options` the question, its options' texts, then them."""
        if self.settings.query_source == "expanded":
            return [" ".join([str(row["question"]), *queries])]
        if self.settings.query_source == "expanded_options":
            return [" ".join([with_options(row), *queries])]
        return queries

    def retrieve(self, queries: list[list[str]]) -> tuple[list[list[Hit]], list[list[list[Hit]]]]:
        """Every completion's documents: one batched search over all queries, then each
        completion's queries' top `query_k` merged to `k`. Also each completion's searches'
        deeper lists, their top `rank_depth` (or `query_k`, if more), where the gold answer's
        rank is read."""
        flat = [query for asked in queries for query in asked]
        depth = max(self.settings.query_k, self.settings.rank_depth)
        found = self.retriever.search(flat, depth) if flat else []
        documents, ranked, at = [], [], 0
        for asked in queries:
            lists = found[at : at + len(asked)]
            documents.append(
                merge_hits([hits[: self.settings.query_k] for hits in lists], self.settings.k)
            )
            ranked.append(lists)
            at += len(asked)
        return documents, ranked

    def answer(
        self, rows: list[dict[str, Any]], documents: list[list[Hit]], network: AdaptedNetwork
    ) -> tuple[list[str], list[float | None]]:
        """The frozen generator's answer letter for each row from its documents, and with
        `answer_mode=likelihood` the probability it gives the gold option (`gold_probability`,
        the softmax of the options' scores; None where the row names no gold letter, or when
        answers are generated)."""
        if not rows:
            return [], []
        network = network if self.reader is None else self.reader  # its own model, or the base
        prompts = [
            self._fill(
                self.settings.answer_template,
                {**row, "documents": documents_text(found, self.settings.document_template)},
                "answer_template",
            )
            for row, found in zip(rows, documents, strict=True)
        ]
        if self.settings.answer_mode == "likelihood":
            scores = options_after(network, prompts, rows, self.settings.frozen_batch_size)
            letters = [LETTERS[max(range(len(row)), key=row.__getitem__)] for row in scores]
            gold = [gold_index(row) for row in rows]
            return letters, [
                option_probability(row, index) if index >= 0 else None
                for row, index in zip(scores, gold, strict=True)
            ]
        texts = frozen_generate(network, self.answerer, prompts, self.settings.frozen_batch_size)
        return [first_letter(text) for text in texts], [None] * len(texts)


def gold_reciprocal_rank(
    ranked: list[list[Hit]], gold_text: str, with_title: bool = False
) -> float:
    """1 / the best rank (from 1), over a completion's searches, of a hit whose text (its title
    too, `with_title`) holds the gold answer; 0 where none of them holds it (or the row names no
    answer). A denser signal than whether the read documents hold it: a query that lifts the
    gold passage from rank 9 to rank 4 scores more before it reaches the documents read."""
    if not gold_text:
        return 0.0
    ranks = [
        rank
        for hits in ranked
        for rank, hit in enumerate(hits, start=1)
        if holds(hit, gold_text, with_title)
    ]
    return 1.0 / min(ranks) if ranks else 0.0


def with_options(row: dict[str, Any]) -> str:
    """The row's question followed by its options' texts, A to D: the no-rewriter query that
    names every candidate answer."""
    return " ".join([str(row["question"]), *(str(row["options"][letter]) for letter in LETTERS)])


def words(text: str) -> list[str]:
    """The lower-cased words of `text`, punctuation dropped: what a lexical search compares."""
    return re.findall(r"[a-z0-9]+", text.lower())


def copies_question(query: str, question: str) -> bool:
    """Whether `query` is the question or its start, word for word (cut where a token limit
    cut it): a query that adds nothing the question lacks."""
    asked, stem = words(query), words(question)
    return bool(asked) and stem[: len(asked)] == asked


def names_option(query: str, row: dict[str, Any]) -> bool:
    """Whether `query` contains one of the row's option texts, word for word."""
    asked = " " + " ".join(words(query)) + " "
    return any(
        f" {' '.join(words(str(option)))} " in asked
        for option in (row.get("options") or {}).values()
        if words(str(option))
    )


def options_after(
    network: AdaptedNetwork, contexts: list[str], rows: list[dict[str, Any]], batch_size: int
) -> list[list[float]]:
    """The frozen base's score of each row's options' texts (A-D, a space before each) as the
    continuation of its context (`frozen_option_scores`)."""
    options = [[" " + str(row["options"][letter]) for letter in LETTERS] for row in rows]
    return frozen_option_scores(network, contexts, options, batch_size)


def gold_index(row: dict[str, Any]) -> int:
    """The position of the row's gold letter among A-D; -1 where it names none."""
    return LETTERS.find(str(row.get("answer") or "?"))


def option_probability(scores: list[float], index: int) -> float:
    """The softmax of the options' scores at `index`: how sure a generator that picks the
    highest-scoring option is of that one."""
    top = max(scores)
    weights = [math.exp(score - top) for score in scores]
    return weights[index] / sum(weights)


def first_letter(text: str) -> str:
    """The first option letter standing alone in a generated answer ('B', 'B.', '(B)'), or ''."""
    for token in (
        text.replace("(", " ").replace(")", " ").replace(".", " ").replace(":", " ").split()
    ):
        if token in LETTERS:
            return token
    return ""
