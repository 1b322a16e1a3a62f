"""The rewriter role: plans once, queries read robustly, frozen calls batched on the base model,
and a GRPO step that changes nothing but the rewriter's LoRA weights."""

from __future__ import annotations

import contextlib
import functools
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
from src.policy.rewriter import Rewriter, first_letter
from src.retrieval.corpus import Document
from src.retrieval.hit import Hit
from src.reward.combine import CombinedReward
from src.rollout.hf import HFSampler
from src.rollout.rollout import Rollout
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
        answer_template="{documents}\nQ: {question}\n{options_text}\nAnswer:",
        plan_cache_dir=str(tmp_path / "plans"),
        plan_model="tiny",
        template="{question}\n{plan}\nQueries:",
        response_prefix="1.",
        **settings,
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
