"""The rewriter role: plans once, queries read robustly, frozen calls batched on the base model,
and a GRPO step that changes nothing but the rewriter's LoRA weights."""

from __future__ import annotations

import contextlib
import functools
import math
import zlib

import lightning as L
import pytest
import torch
from torch.utils.data import DataLoader

from src.data.datamodule import keep_rows
from src.data.mcq import mcq_row
from src.grpo.module import GRPOModule
from src.grpo.settings import AlgoSettings
from src.model.causal_lm import load_causal_lm
from src.policy.rewriter import (
    Rewriter,
    copies_question,
    first_letter,
    gold_reciprocal_rank,
    names_option,
    option_probability,
)
from src.policy.rewriter_settings import RewriterSettings
from src.retrieval.corpus import Document
from src.retrieval.hit import Hit
from src.reward.combine import CombinedReward
from src.rollout.hf import HFSampler
from src.rollout.rollout import Rollout
from src.utils.errors import ConfigError
from tests.helpers.models import lora_lm as moved_lora_lm

DOCS = [
    Document("d1", "Anthrax", "Anthrax is caused by Bacillus anthracis."),
    Document("d2", "Cholera", "Cholera is caused by Vibrio cholerae."),
]


class FakeRetriever:
    """Returns the document a query's checksum picks, or nothing for every third checksum, so
    different queries lead to different documents (and some to none)."""

    def __init__(self) -> None:
        self.calls: list[list[str]] = []

    def search(self, queries: list[str], k: int) -> list[list[Hit]]:
        self.calls.append(list(queries))
        found = []
        for query in queries:
            code = zlib.crc32(query.encode())
            found.append([] if code % 3 == 0 else [Hit(DOCS[code % 2], 1.0)])
        return found


def rows() -> list[dict]:
    return [
        mcq_row("Anthrax is caused by?", ["Vibrio cholerae", "Bacillus anthracis", "X", "Y"], 1),
        mcq_row("Cholera is caused by?", ["Vibrio cholerae", "Bacillus anthracis", "X", "Y"], 0),
    ]


def make_rewriter(tmp_path, retriever=None, **settings) -> Rewriter:
    return Rewriter(
        retriever=retriever or FakeRetriever(),
        planner=HFSampler(max_completion_length=4),
        answerer=HFSampler(max_completion_length=4),
        plan_template="Plan: {question}",
        plan_cache_dir=str(tmp_path / "plans"),
        plan_model="tiny",
        **{
            "template": "{question}\n{plan}\nQueries:",
            "answer_template": "{documents}\nQ: {question}\n{options_text}\nAnswer:",
            "response_prefix": "1.",
            **settings,
        },
    )


@pytest.fixture(scope="module")
def lora_lm(tiny_lm):
    # a trained-looking adapter, so adapter on and off differ
    return moved_lora_lm(tiny_lm, target_modules=["q_proj", "v_proj"], std=0.5)


def test_plans_are_generated_once_then_read_from_the_cache(tmp_path, lora_lm, monkeypatch):
    role = make_rewriter(tmp_path)
    first = rows()
    figures = role.prepare(lora_lm, first)
    assert figures["planner/generated"] == 2 and figures["planner/cache_hits"] == 0
    assert all(isinstance(row["plan"], str) for row in first)
    again = make_rewriter(tmp_path)
    monkeypatch.setattr(again.planner, "sample", lambda *a, **k: pytest.fail("planned again"))
    second = rows()
    figures = again.prepare(lora_lm, second)
    assert figures["planner/generated"] == 0 and figures["planner/cache_hits"] == 2
    assert [row["plan"] for row in second] == [row["plan"] for row in first]


def test_nothing_is_planned_where_no_prompt_reads_the_plan(tmp_path, lora_lm, monkeypatch):
    role = make_rewriter(tmp_path, template="{question}\n{options_text}\nQuery:")
    monkeypatch.setattr(
        "src.policy.rewriter.frozen_generate", lambda *a, **k: pytest.fail("planned")
    )
    batch = rows()
    assert role.prepare(lora_lm, batch)["planner/generated"] == 0
    assert [row["plan"] for row in batch] == ["", ""]
    assert not (tmp_path / "plans").exists()
    assert make_rewriter(tmp_path).reads_plans()  # the default template reads it
    assert make_rewriter(
        tmp_path, template="{question}", answer_template="{plan}\n{documents}"
    ).reads_plans()


def test_a_plan_cache_cut_short_loses_only_its_broken_line(tmp_path, lora_lm):
    clean = rows()
    make_rewriter(tmp_path / "clean").prepare(lora_lm, clean)
    role = make_rewriter(tmp_path)
    role.prepare(lora_lm, rows()[:1])
    (cache,) = (tmp_path / "plans").iterdir()
    cache.write_text(cache.read_text()[:-9])  # a run stopped while writing the first plan
    again = rows()
    assert make_rewriter(tmp_path).prepare(lora_lm, again)["planner/generated"] == 2
    later = rows()  # the plans appended after the broken line are read back
    assert make_rewriter(tmp_path).prepare(lora_lm, later)["planner/cache_hits"] == 2
    assert [row["plan"] for row in later] == [row["plan"] for row in clean]


def test_the_plan_starts_with_its_prefix_and_the_framing_names_the_cache(
    tmp_path, lora_lm, monkeypatch
):
    asked = []

    def planner(network, sampler, prompts, batch_size):
        asked.extend(prompts)
        return ['anthrax", "facts_needed": ["cause"]}'] * len(prompts)

    monkeypatch.setattr("src.policy.rewriter.frozen_generate", planner)
    role = make_rewriter(tmp_path, plan_prefix='{"topic": "')
    batch = rows()
    figures = role.prepare(lora_lm, batch)
    assert asked == [f'Plan: {row["question"]}{{"topic": "' for row in batch]
    assert figures["planner/not_json"] == 0
    assert batch[0]["plan"] == '{"topic": "anthrax", "facts_needed": ["cause"]}'
    unprefixed = make_rewriter(tmp_path)  # another framing: planned again, in its own file
    assert unprefixed.prepare(lora_lm, rows())["planner/generated"] == 2
    assert len(list((tmp_path / "plans").glob("*.jsonl"))) == 2


def test_the_planner_speaks_through_the_chat_template_as_the_rewriter_does(tmp_path):
    class Chat:
        chat_template = "{{ messages }}"

        def apply_chat_template(self, messages, tokenize, add_generation_prompt):
            return f"<user>{messages[-1]['content']}</user><assistant>"

    role = make_rewriter(tmp_path, plan_prefix="{", use_chat_template="auto")
    assert role._plan_prompt(Chat(), "Plan: x", role._uses_chat(Chat())) == (
        "<user>Plan: x</user><assistant>{"
    )
    plain = make_rewriter(tmp_path, plan_prefix="{")  # use_chat_template false: the text alone
    assert plain._plan_prompt(Chat(), "Plan: x", plain._uses_chat(Chat())) == "Plan: x{"


def test_malformed_completions_get_no_answer_and_never_raise(tmp_path, lora_lm):
    role = make_rewriter(tmp_path)
    batch = rows()
    role.prepare(lora_lm, batch)
    completions = ["", "\n2.\n3.", " anthrax cause\n2. cholera organism\n3. spores"]
    outcomes = role.outcomes(completions, [batch[0]] * 3, lora_lm)
    assert outcomes.texts[:2] == ["", ""]
    assert [d["no_queries"] for d in outcomes.details] == [True, True, False]
    third = outcomes.details[2]
    assert third["queries"] == ["anthrax cause", "cholera organism", "spores"]
    assert (outcomes.texts[2] in set("ABCD")) == bool(third["documents"])


def test_frozen_generator_runs_once_per_distinct_prompt_on_the_base(tmp_path, lora_lm, monkeypatch):
    retriever = FakeRetriever()
    role = make_rewriter(tmp_path, retriever)
    batch = rows()
    role.prepare(lora_lm, batch)
    scored, disabled = [], []
    continuation_scores = lora_lm.continuation_scores

    def scores(contexts, options):
        scored.append([len(choices) for choices in options])
        return continuation_scores(contexts, options)

    monkeypatch.setattr(lora_lm, "continuation_scores", scores)
    adapter_disabled = lora_lm.adapter_disabled

    @contextlib.contextmanager
    def spy():
        disabled.append(True)
        with adapter_disabled():
            yield

    monkeypatch.setattr(lora_lm, "adapter_disabled", spy)
    query = next(
        q for q in ("anthrax", "cholera", "spores", "organism") if zlib.crc32(q.encode()) % 3
    )
    outcomes = role.outcomes([f" {query}"] * 8, [batch[0]] * 8, lora_lm)
    assert retriever.calls == [[query] * 8]  # one search for every query of the batch
    assert scored == [[4]]  # 8 identical prompts: the context is read once for its 4 options
    assert disabled  # answered by the base model
    assert len(set(outcomes.texts)) == 1


def test_the_question_as_the_only_query(tmp_path, lora_lm):
    retriever = FakeRetriever()
    role = make_rewriter(tmp_path, retriever, query_source="question")
    batch = rows()
    role.prepare(lora_lm, batch)
    outcomes = role.outcomes(["whatever", ""], batch, lora_lm)
    assert retriever.calls == [[batch[0]["question"], batch[1]["question"]]]
    assert [d["queries"] for d in outcomes.details] == [[r["question"]] for r in batch]


def test_expanded_searches_the_question_followed_by_the_queries(tmp_path, lora_lm):
    retriever = FakeRetriever()
    role = make_rewriter(tmp_path, retriever, query_source="expanded")
    batch = rows()
    role.prepare(lora_lm, batch)
    outcomes = role.outcomes([" spores\n2. toxin", " ?"], batch, lora_lm)
    # one search per completion; with no readable query, the question alone
    assert retriever.calls == [[batch[0]["question"] + " spores toxin", batch[1]["question"]]]
    assert [d["queries"] for d in outcomes.details] == [["spores", "toxin"], []]
    assert [d["no_queries"] for d in outcomes.details] == [False, True]


def test_expanded_options_searches_the_question_its_options_then_the_queries(tmp_path, lora_lm):
    retriever = FakeRetriever()
    role = make_rewriter(tmp_path, retriever, query_source="expanded_options")
    assert role.reads_completions()
    batch = rows()
    role.prepare(lora_lm, batch)
    role.outcomes([" spores\n2. toxin", " ?"], batch, lora_lm)
    options = "Vibrio cholerae Bacillus anthracis X Y"
    assert retriever.calls == [
        [f"{batch[0]['question']} {options} spores toxin", f"{batch[1]['question']} {options}"]
    ]


def test_the_question_with_its_options_is_one_query_and_samples_nothing(tmp_path, lora_lm):
    from src.policy.episode import run_episode

    retriever = FakeRetriever()
    role = make_rewriter(tmp_path, retriever, query_source="question_options")
    assert not role.reads_completions()
    batch = rows()
    role.prepare(lora_lm, batch)
    reward = CombinedReward({"answer": lambda o, r: [float(bool(x)) for x in o]})
    episode = run_episode(lora_lm, NoSampling(), role, reward, batch, 1, greedy=True)
    options = "Vibrio cholerae Bacillus anthracis X Y"
    assert retriever.calls == [[f"{row['question']} {options}" for row in batch]]
    assert [d["names_option"] for d in episode.details] == [True, True]
    assert [d["copies_question"] for d in episode.details] == [False, False]


@pytest.mark.parametrize(
    ("query", "copies"),
    [
        ("Anthrax is caused by?", True),
        ("anthrax IS caused", True),  # the question's start, cut by the token limit
        ("Anthrax is caused by Bacillus anthracis", False),  # adds words
        ("caused by anthrax", False),  # the words in another order
        ("", False),
    ],
)
def test_a_query_copies_the_question_when_it_is_its_start_word_for_word(query, copies):
    assert copies_question(query, "Anthrax is caused by?") is copies


def test_a_query_names_an_option_when_it_holds_one_whole():
    row = rows()[0]
    assert names_option("spores of bacillus anthracis, gram positive", row)
    assert not names_option("bacillus spores", row)  # part of an option
    assert not names_option("Xylose", row)  # an option inside a word


def test_each_query_is_reported_as_a_copy_or_not(tmp_path, lora_lm):
    role = make_rewriter(tmp_path, FakeRetriever())
    batch = rows()
    role.prepare(lora_lm, batch)
    outcomes = role.outcomes([" Anthrax is caused", " toxin of Vibrio cholerae"], batch, lora_lm)
    assert [d["copies_question"] for d in outcomes.details] == [True, False]
    assert [d["names_option"] for d in outcomes.details] == [False, True]


def test_each_completion_reports_its_queries_terms_and_repeats(tmp_path, lora_lm):
    from src.reward.detail import RoleDetail

    role = make_rewriter(tmp_path, FakeRetriever(), query_source="expanded")
    batch = rows()
    role.prepare(lora_lm, batch)
    # the terms of the completion, not the question they are searched after: 'toxin toxin
    # toxin spores' has 4 terms, 2 distinct, 2 repeats; 'gram positive rods' none repeated
    outcomes = role.outcomes([" toxin, toxin, toxin spores", " gram positive rods"], batch, lora_lm)
    shapes = [
        {key: d[key] for key in ("repeats_term", "query_terms", "query_distinct_terms")}
        for d in outcomes.details
    ]
    assert shapes == [
        {"repeats_term": True, "query_terms": 4.0, "query_distinct_terms": 2.0},
        {"repeats_term": False, "query_terms": 3.0, "query_distinct_terms": 3.0},
    ]
    penalty = RoleDetail("repeated_term_share").score_details(outcomes.details)
    assert penalty == [0.5, 0.0]  # reward=query_repetition's term, before its weight


def test_gold_retrieved_is_a_reward_term(tmp_path, lora_lm):
    from src.policy.episode import run_episode
    from src.reward.detail import RoleDetail

    role = make_rewriter(tmp_path, FakeRetriever(), query_source="question")
    batch = rows()
    role.prepare(lora_lm, batch)
    reward = CombinedReward(
        {"answer": is_letter_a, "gold": RoleDetail("gold_retrieved")},
        {"answer": 1.0, "gold": 0.5},
    )
    episode = run_episode(lora_lm, NoSampling(), role, reward, batch, 1, greedy=True)
    gold = [float(d["gold_retrieved"]) for d in episode.details]
    assert episode.reward_parts["gold"].tolist() == gold
    expected = [float(o == "A") + 0.5 * g for o, g in zip(episode.outcomes, gold, strict=True)]
    assert episode.rewards.tolist() == expected


def hits(*contents: str) -> list[Hit]:
    return [Hit(Document(f"d{i}", "t", text), 1.0) for i, text in enumerate(contents)]


def test_the_gold_rank_is_the_best_over_the_searches():
    first = hits("nothing", "spores of Bacillus anthracis", "anthracis again")
    second = hits("x", "y", "z", "Bacillus anthracis")
    assert gold_reciprocal_rank([first, second], "bacillus anthracis") == 0.5
    assert gold_reciprocal_rank([second], "bacillus anthracis") == 0.25
    assert gold_reciprocal_rank([hits("x"), []], "bacillus anthracis") == 0.0
    assert gold_reciprocal_rank([first], "") == 0.0  # the row names no answer


class RankedRetriever:
    """Five hits per query, the gold passage at the position the query's length picks; it
    records the depth asked."""

    def __init__(self) -> None:
        self.depths: list[int] = []

    def search(self, queries: list[str], k: int) -> list[list[Hit]]:
        self.depths.append(k)
        found = []
        for query in queries:
            at = len(query.split()) % 5
            texts = ["filler"] * 5
            texts[at] = "Anthrax is caused by Bacillus anthracis."
            found.append(hits(*texts)[:k])
        return found


def test_the_gold_rank_is_read_deeper_than_the_documents_read(tmp_path, lora_lm):
    retriever = RankedRetriever()
    role = make_rewriter(tmp_path, retriever, num_queries=1, query_k=2, k=2, rank_depth=5)
    batch = rows()[:1] * 3
    role.prepare(lora_lm, batch)
    outcomes = role.outcomes(
        [" spore toxin gram rod lung", " spore", " spore toxin gram rod"], batch, lora_lm
    )
    assert retriever.depths == [5]
    # gold at index 0, 1 and 4: read in the first two, ranked in all three
    assert [d["gold_retrieved"] for d in outcomes.details] == [True, True, False]
    assert [d["gold_reciprocal_rank"] for d in outcomes.details] == [1.0, 0.5, 0.2]
    assert [len(d["documents"]) for d in outcomes.details] == [2, 2, 2]


def test_a_rank_depth_below_one_is_refused(tmp_path):
    with pytest.raises(ConfigError, match="policy.rank_depth must be a whole number >= 1"):
        make_rewriter(tmp_path, rank_depth=0)


class NoSampling:
    """A sampler that must not be asked: the role reads no completions."""

    max_completion_length = 4
    temperature = 1.0

    def sample(self, *args, **kwargs):
        raise AssertionError("sampled completions nobody reads")

    def sync(self, network) -> None:
        pass


def test_the_question_head_samples_nothing(tmp_path, lora_lm):
    from src.policy.episode import run_episode

    retriever = FakeRetriever()
    role = make_rewriter(tmp_path, retriever, query_source="question")
    batch = rows()
    role.prepare(lora_lm, batch)
    reward = CombinedReward({"answer": lambda o, r: [float(bool(x)) for x in o]})
    episode = run_episode(lora_lm, NoSampling(), role, reward, batch, 1, greedy=True)
    assert retriever.calls == [[batch[0]["question"], batch[1]["question"]]]
    assert episode.rollout.completions == ["", ""]  # EOS alone
    assert make_rewriter(tmp_path).reads_completions()  # the rewriter head samples as before


def test_generated_answers_are_read_to_their_letter():
    assert [first_letter(t) for t in ["B", " (C) because", "Answer: D.", "none", "A."]] == [
        "B",
        "C",
        "D",
        "",
        "A",
    ]


def is_letter_a(outcomes, rows):
    return [float(outcome == "A") for outcome in outcomes]


def test_a_step_changes_only_the_rewriters_lora_weights(tmp_path, tiny_lm):
    lm = load_causal_lm(
        tiny_lm.network.name_or_path,
        lora={"r": 4, "lora_alpha": 8, "target_modules": ["q_proj", "v_proj"]},
    )
    role = make_rewriter(tmp_path)
    data = rows() * 2
    role.prepare(lm, data)
    before = {name: p.detach().clone() for name, p in lm.named_parameters()}
    module = GRPOModule(
        lm=lm,
        sampler=HFSampler(max_completion_length=12),
        policy=role,
        reward=CombinedReward({"answer": lambda o, r: [float(bool(x)) for x in o]}),
        optimizer=functools.partial(torch.optim.SGD, lr=1.0),
        settings=AlgoSettings(group_size=4, kl_beta=0.02, samples_every_n_steps=0),
    )
    torch.manual_seed(3)
    trainer = L.Trainer(
        max_steps=2,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
    )
    trainer.fit(module, DataLoader(data, batch_size=2, collate_fn=keep_rows))
    changed = {name for name, p in lm.named_parameters() if not torch.equal(p, before[name])}
    assert changed, "no weight moved: the test needs non-zero advantages"
    assert all("lora_" in name for name in changed), sorted(changed)


def test_options_are_scored_after_one_batched_pass_over_the_contexts(lora_lm):
    contexts = [
        "[1] Anthrax: Anthrax is caused by Bacillus anthracis.\nQ: What causes anthrax?\nAnswer:",
        "Q: Which vitamin?\nAnswer:",
    ]
    options = [
        [" Vibrio cholerae", " Bacillus anthracis", " X", " Treponema pallidum"],
        [" C", " D"],
    ]
    expected = []
    for context, choices in zip(contexts, options, strict=True):
        ids, mask = lora_lm.encode_completions(choices)
        mask[torch.arange(len(choices)), mask.sum(1) - 1] = 0  # leave the end marker out
        encoded = lora_lm.encode_prompts([context] * len(choices))
        rows = Rollout(encoded["input_ids"], encoded["attention_mask"], ids, mask, None, [])
        with torch.no_grad():
            logps = lora_lm.log_probs(rows)[0]
        expected.append(((logps * mask).sum(1) / mask.sum(1)).tolist())
    got = lora_lm.continuation_scores(contexts, options)
    assert [len(row) for row in got] == [4, 2]
    for row, want in zip(got, expected, strict=True):
        assert row == pytest.approx(want, abs=1e-5)


def test_option_probability_is_the_softmax_of_the_scores():
    from src.policy.rewriter import option_probability

    # scores log 1, log 2, log 1: probabilities 1/4, 2/4, 1/4
    scores = [0.0, math.log(2.0), 0.0]
    assert option_probability(scores, 1) == pytest.approx(0.5)
    assert option_probability(scores, 2) == pytest.approx(0.25)
    assert option_probability([-1000.0, -1001.0], 0) == pytest.approx(1 / (1 + math.exp(-1)))


def test_the_gold_options_probability_is_reported_beside_the_answer(tmp_path, lora_lm):
    from src.policy.rewriter import LETTERS, option_probability

    role = make_rewriter(tmp_path, AlwaysFirst(), query_source="question")
    batch = rows()
    role.prepare(lora_lm, batch)
    outcomes = role.outcomes(["", ""], batch, lora_lm)
    for row, detail in zip(batch, outcomes.details, strict=True):
        prompt = role._fill(
            role.settings.answer_template,
            {**row, "documents": documents_text_of(role, detail)},
            "answer_template",
        )
        options = [" " + row["options"][letter] for letter in LETTERS]
        with lora_lm.adapter_disabled():  # the frozen generator is the base model
            (scores,) = lora_lm.continuation_scores([prompt], [options])
        gold = LETTERS.index(row["answer"])
        assert detail["gold_probability"] == pytest.approx(option_probability(scores, gold))
        assert detail["answer"] == LETTERS[max(range(4), key=scores.__getitem__)]
    generated = make_rewriter(tmp_path, query_source="question", answer_mode="generate")
    generated.prepare(lora_lm, batch)
    details = generated.outcomes(["", ""], batch, lora_lm).details
    assert all("gold_probability" not in detail for detail in details)


class AlwaysFirst:
    """Finds the first document for every query."""

    def search(self, queries: list[str], k: int) -> list[list[Hit]]:
        return [[Hit(DOCS[0], 1.0)] for _ in queries]


def documents_text_of(role, detail):
    from src.retrieval.hit import documents_text

    by_id = {doc.id: doc for doc in DOCS}
    return documents_text(
        [Hit(by_id[i], 1.0) for i in detail["documents"]], role.settings.document_template
    )


def test_a_warm_start_teaches_the_query_its_target_names(tmp_path):
    with pytest.raises(ConfigError, match=r"policy.sft_target \(for example ' \{question\}'"):
        make_rewriter(tmp_path).sft_targets(rows())  # no target: there are no gold queries
    taught = make_rewriter(tmp_path, sft_target=" {question}").sft_targets(rows())
    assert taught == [" Anthrax is caused by?", " Cholera is caused by?"]
    with pytest.raises(ConfigError, match="sft_target"):
        make_rewriter(tmp_path, sft_target="{gold_query}").sft_targets(rows())


def test_plans_made_for_prompts_with_a_bos_have_a_cache_of_their_own(
    tmp_path, lora_lm, monkeypatch
):
    """A model whose tokenizer adds a BOS (Gemma) reads its prompts with it: plans made
    before that, under the same model name and template, are not reused."""
    monkeypatch.setattr(
        "src.policy.rewriter.frozen_generate",
        lambda network, sampler, prompts, batch_size: ['{"topic": "x"}'] * len(prompts),
    )
    assert make_rewriter(tmp_path).prepare(lora_lm, rows())["planner/generated"] == 2
    monkeypatch.setattr("src.policy.rewriter.added_bos", lambda tokenizer: 1)
    assert make_rewriter(tmp_path).prepare(lora_lm, rows())["planner/generated"] == 2
    assert len(list((tmp_path / "plans").glob("*.jsonl"))) == 2


class PicksOption:
    """A reader of its own that prefers option `index` whatever it reads, and counts its calls."""

    def __init__(self, index: int) -> None:
        self.index, self.calls = index, 0

    def continuation_scores(self, contexts, continuations):
        self.calls += 1
        return [[float(i == self.index) for i in range(len(o))] for o in continuations]

    @contextlib.contextmanager
    def adapter_disabled(self):
        yield


def test_a_reader_of_its_own_answers_instead_of_the_policys_base(tmp_path, lora_lm, monkeypatch):
    reader = PicksOption(2)
    role = make_rewriter(tmp_path, AlwaysFirst(), query_source="question", reader=reader)
    batch = rows()
    role.prepare(lora_lm, batch)

    def never(*args, **kwargs):
        raise AssertionError("the policy's base answered")

    monkeypatch.setattr(lora_lm, "continuation_scores", never)
    outcomes = role.outcomes(["", ""], batch, lora_lm)
    assert reader.calls == 1 and outcomes.texts == ["C", "C"]
    assert [d["gold_probability"] for d in outcomes.details] == pytest.approx(
        [option_probability([0, 0, 1, 0], 1), option_probability([0, 0, 1, 0], 0)]
    )


def test_the_task_reads_with_another_model_from_the_command_line(make_cfg):
    """`+model@policy.reader=NAME` puts a model config under policy.reader; the schema takes it."""
    from src.runs.schema import check_schema

    cfg = make_cfg("task=medqa_rewriter", "model=tiny", "+model@policy.reader=tiny")
    assert cfg.policy.reader._target_ == "src.model.causal_lm.load_causal_lm"
    check_schema(cfg)


def test_the_rewriters_settings_are_read_once_from_the_flat_keys():
    keys = {
        "plan_template": "Plan: {question}",
        "answer_template": "{documents}\n{question}",
        "plan_cache_dir": "plans",
        "plan_model": "tiny",
        "k": 2,
        "template": "{question}",  # the generator's: left in the keys
    }
    settings = RewriterSettings.taken_from(keys)
    assert (settings.k, settings.query_k, settings.plan_prefix) == (2, 3, "")
    assert keys == {"template": "{question}"}
    with pytest.raises(ConfigError, match="policy=rewriter needs policy.plan_model"):
        RewriterSettings.taken_from(
            {"plan_template": "x", "answer_template": "y", "plan_cache_dir": "z"}
        )
    for key, value, words in (
        ("query_source", "questions", "policy.query_source must be one of"),
        ("answer_mode", "vote", "policy.answer_mode must be one of"),
        ("frozen_batch_size", 0, "policy.frozen_batch_size must be a whole number >= 1"),
    ):
        with pytest.raises(ConfigError, match=words):
            RewriterSettings("p", "a", "c", "m", **{key: value})
