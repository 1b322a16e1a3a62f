"""End-to-end: the rewriter and reader recipes train, dry-run and evaluate on the tiny model
with the shipped corpus, and their caches make a second run plan nothing and index nothing."""

from __future__ import annotations

import json
from pathlib import Path

import mlflow
import pytest

from src.eval import evaluate
from src.runs.parts import build_run_parts, load_reference
from src.runs.settings import check_settings
from src.train import train
from src.utils.config import build
from src.utils.errors import ConfigError, MissingFileError, UserError
from tests.helpers.mlflow_runs import history, runs

REWRITER = [
    "task=medqa_rewriter_smollm2",
    "hardware=[cpu,lora]",
    "policy.planner.max_completion_length=6",
    "policy.num_queries=2",
    "retrieval.k=1",
    "algo.max_completion_length=12",
    "trainer.max_steps=2",
    "trainer.val_check_interval=2",
]
ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "src/data/samples/medqa_findings_sample.jsonl"
UNSEEN = ROOT / "src/data/samples/medqa_findings_unseen.jsonl"
UNSEEN_TEXTBOOK = ROOT / "src/retrieval/samples/findings_unseen_textbook.jsonl"
READER = [
    "task=reader",
    "hardware=[cpu,lora]",
    "retrieval.k=1",
    "algo.max_completion_length=6",
    "trainer.max_steps=2",
    "trainer.val_check_interval=2",
]


SEARCHER = [
    "task=medqa_searcher_smollm2",
    "hardware=[cpu,lora]",
    "rollout._target_=tests.helpers.scripted_turns.ScriptedTurns",  # searches, then answers
    "+rollout.query='triage note row {row}'",  # words of the textbook's notes: BM25 finds some
    "algo.max_completion_length=64",
    "trainer.max_steps=2",
    "trainer.val_check_interval=2",
    "algo.samples_every_n_steps=2",
]


@pytest.fixture
def rewriter(tmp_path) -> list[str]:
    """The rewriter recipe on 24 of its sample's questions (planning all 296 takes a while)."""
    path = tmp_path / "medqa.jsonl"
    path.write_text("\n".join(SAMPLE.read_text().splitlines()[:24]) + "\n")
    return [*REWRITER, f"data.path={path}"]


@pytest.fixture
def unseen(tmp_path) -> list[str]:
    """4 questions of the unseen split (kinds never trained on) and their own textbook."""
    path = tmp_path / "unseen.jsonl"
    path.write_text("\n".join(UNSEEN.read_text().splitlines()[:4]) + "\n")
    return [f"data.unseen.path={path}", f"data.unseen.corpus={UNSEEN_TEXTBOOK}"]


@pytest.mark.slow
def test_rewriter_trains_caches_and_evaluates_four_ways(make_cfg, tmp_path, rewriter, unseen):
    cfg = make_cfg(*rewriter, *unseen, f"save_model={tmp_path / 'rewriter'}")
    train(cfg)
    first = runs(cfg)[-1]
    planned = history(cfg, first, "planner/generated")[0]
    assert planned > 0 and history(cfg, first, "planner/cache_hits")[0] == 0
    for name in (
        "timing/sampling",
        "timing/retrieval",
        "timing/frozen_generation",
        "timing/reward",
        "timing/log_probs",
        "timing/update",
        "role/num_queries",
        "role/gold_retrieved",
        "rewards/accuracy/mean",
        "rewards/gold_probability/mean",  # the preset's second reward term
        "role/gold_probability",
    ):
        assert sorted(history(cfg, first, name)) == [1, 2], name
    assert sorted(history(cfg, first, "eval/accuracy")) == [0, 2]
    assert sorted(history(cfg, first, "eval/role/gold_retrieved")) == [0, 2]
    for name in ("accuracy", "role/gold_retrieved", "role/repeats_term", "role/query_terms"):
        assert sorted(history(cfg, first, f"eval_unseen/{name}")) == [0, 2], name  # beside eval/
    cache = Path(cfg.paths.cache_dir) / "retrieval"
    built = {index.name: index.stat().st_mtime_ns for index in cache.iterdir()}
    assert len(built) == 2  # the training textbook's index and the unseen split's

    train(cfg)  # the same recipe again: plans from the cache, the index as it was
    second = runs(cfg)[-1]
    assert history(cfg, second, "planner/generated")[0] == 0
    assert history(cfg, second, "planner/cache_hits")[0] == planned
    assert {index.name: index.stat().st_mtime_ns for index in cache.iterdir()} == built

    eval_cfg = make_cfg(
        *rewriter,
        f"eval.adapters.grpo={tmp_path / 'rewriter'}",
        f"eval.output_dir={tmp_path / 'eval'}",
        "eval.max_rows=4",
    )
    summaries = evaluate(eval_cfg)
    assert list(summaries) == ["question", "question_options", "base", "grpo"]
    records = [json.loads(line) for line in (tmp_path / "eval" / "eval_results.jsonl").open()]
    assert len(records) == 4 * 4
    for record in records:
        assert {"queries", "documents", "answer", "accuracy", "copies_question"} <= set(record)
        if record["head"] == "question":
            assert record["queries"] == [record["question"]] and len(record["documents"]) == 1
            assert record["copies_question"] and not record["names_option"]
        if record["head"] == "question_options":
            assert record["queries"][0].startswith(record["question"] + " ")
            assert record["names_option"] and not record["copies_question"]
    for head in summaries:
        assert {"role/gold_retrieved", "role/copies_question"} <= set(summaries[head]), head
    assert summaries["question"]["role/copies_question"] == 1.0

    unseen_cfg = make_cfg(
        *rewriter,
        *unseen,
        f"eval.adapters.grpo={tmp_path / 'rewriter'}",
        f"eval.output_dir={tmp_path / 'eval_unseen'}",
        "eval.split=unseen",
    )
    summaries = evaluate(unseen_cfg)
    assert list(summaries) == ["question", "question_options", "base", "grpo"]
    records = [json.loads(line) for line in (tmp_path / "eval_unseen/eval_results.jsonl").open()]
    textbook = {json.loads(line)["title"] for line in UNSEEN_TEXTBOOK.open()}
    questions = {json.loads(line)["question"] for line in UNSEEN.open()}
    assert len(records) == 4 * 4 and {record["question"] for record in records} <= questions
    assert all(set(record["titles"]) <= textbook for record in records)  # its own textbook
    for head, summary in summaries.items():
        assert {"role/repeats_term", "role/query_distinct_terms", "role/query_terms"} <= set(
            summary
        ), head


@pytest.mark.slow
def test_searcher_trains_on_its_own_tokens_and_evaluates_four_ways(
    make_cfg, tmp_path, rewriter, unseen
):
    sample = next(o for o in rewriter if o.startswith("data.path="))  # 24 of the questions
    cfg = make_cfg(*SEARCHER, sample, *unseen, f"save_model={tmp_path / 'searcher'}")
    train(cfg)
    (run,) = runs(cfg)
    for name in ("accuracy", "role/searches", "role/repeats_term", "role/gold_in_information"):
        assert sorted(history(cfg, run, f"eval_unseen/{name}")) == [0, 2], name
    for name in ("searches/mean", "completions/mean_inserted_length", "role/searches"):
        assert sorted(history(cfg, run, name)) == [1, 2], name
    assert set(history(cfg, run, "searches/mean").values()) == {1.0}  # one search a row
    assert set(history(cfg, run, "searches/none_share").values()) == {0.0}
    assert min(history(cfg, run, "completions/mean_inserted_length").values()) > 10
    assert max(abs(v) for v in history(cfg, run, "loss").values()) > 0  # the answers differ
    # the samples table shows each turn: what was written, the query, the passages' ids
    client = mlflow.MlflowClient(tracking_uri=cfg.paths.mlflow_uri)
    table = json.loads(
        Path(client.download_artifacts(run.info.run_id, "samples/step_000002.json")).read_text()
    )
    turns = [json.loads(row[table["columns"].index("turns")]) for row in table["data"]]
    first, last = turns[0]
    assert first["query"].startswith("triage note row") and last["wrote"].startswith("<answer>")
    assert all(t[0]["passages"][0].startswith("note-") for t in turns)  # the tool's ids
    # the length counts only what the policy wrote (bytes here): " triage note row N</search>"
    # after the response prefix "<search>", then "<answer>B. option</answer>" (the row ends
    # there, before the script's EOS); never the inserted passages
    prefix = len(cfg.policy.response_prefix.encode())
    written = [sum(len(turn["wrote"].encode()) for turn in row) - prefix for row in turns]
    assert history(cfg, run, "completions/mean_length")[2] == pytest.approx(
        sum(written) / len(written)
    )
    assert all(row[0]["wrote"].endswith("</search>") and len(row) == 2 for row in turns)

    eval_cfg = make_cfg(
        *SEARCHER, sample,
        f"eval.adapters.grpo={tmp_path / 'searcher'}",
        f"eval.output_dir={tmp_path / 'eval'}",
        "eval.max_rows=4",
    )  # fmt: skip
    summaries = evaluate(eval_cfg)
    assert list(summaries) == ["no_retrieval", "rag", "base", "grpo"]
    assert summaries["no_retrieval"]["role/searches"] == 0.0
    assert summaries["rag"]["role/searches"] == 1.0  # the question's, before the policy writes
    assert summaries["base"]["role/searches"] == summaries["grpo"]["role/searches"] == 1.0
    records = [json.loads(line) for line in (tmp_path / "eval" / "eval_results.jsonl").open()]
    assert len(records) == 4 * 4
    for record in records:
        assert {"queries", "gold_in_information", "accuracy"} <= set(record)


def test_an_oracle_evaluation_reads_every_rows_gold_passage_whatever_was_searched(
    make_cfg, tmp_path, rewriter
):
    """`eval.oracle=true`: every search of every head reads the row's gold passage (how well a
    head reads it), the scripted query notwithstanding; the records say so."""
    sample = next(o for o in rewriter if o.startswith("data.path="))
    eval_cfg = make_cfg(
        *SEARCHER, sample,
        "eval.heads=[base]",
        "eval.oracle=true",
        f"eval.output_dir={tmp_path / 'eval'}",
        "eval.max_rows=2",
    )  # fmt: skip
    summaries = evaluate(eval_cfg)
    assert summaries["base"]["role/oracle"] == 1.0
    assert summaries["base"]["role/gold_in_information"] == 1.0
    records = [json.loads(line) for line in (tmp_path / "eval" / "eval_results.jsonl").open()]
    assert [record["oracle"] for record in records] == [1.0, 1.0]
    for record in records:  # the query found a triage note; the gold passage was read instead
        assert record["queries"][0].startswith("triage note row")


@pytest.mark.slow
def test_reader_trains_with_overlap_rewards(make_cfg, tmp_path):
    cfg = make_cfg(*READER)
    train(cfg)
    run = runs(cfg)[-1]
    for name in (
        "rewards/f1/mean",
        "rewards/rouge_l/mean",
        "rewards/bleu/mean",
        "rewards/overlap/mean",
        "timing/sampling",
        "timing/update",
    ):
        assert sorted(history(cfg, run, name)) == [1, 2], name
    for name in ("eval/overlap", "eval/f1", "eval/rouge_l", "eval/bleu"):
        assert sorted(history(cfg, run, name)) == [0, 2], name
    assert run.data.params["algo.top_k_ratio"] == "0.5"
    assert run.data.tags["retrieval"] == "bm25"


@pytest.mark.parametrize(
    ("overrides", "error", "message"),
    [
        (["model.lora=null"], ConfigError, "model.lora is null"),
        (["sft.enabled=true"], ConfigError, "sft.enabled=false"),
        (["algo.top_k_ratio=0"], ConfigError, "algo.top_k_ratio"),
        (["algo.kl_beta=0", "algo.ref_model_path=/nowhere"], ConfigError, "algo.kl_beta is 0"),
        (["algo.ref_model_path=/nowhere"], MissingFileError, "algo.ref_model_path: no saved"),
    ],
)
def test_settings_that_cannot_work(make_cfg, overrides, error, message):
    cfg = make_cfg(
        *[o for o in REWRITER if not o.startswith("hardware")], "hardware=[cpu,lora]", *overrides
    )
    with pytest.raises(error, match=message):
        check_settings(cfg)


def test_the_rewriter_task_brings_the_lora_its_role_needs(make_cfg):
    cfg = make_cfg("task=medqa_rewriter")  # model=tiny, hardware=[cpu]: no LoRA of their own
    check_settings(cfg)
    assert cfg.model.lora.r == 16 and cfg.model.lora.lora_dropout == 0.0
    assert "tiny_llama" in cfg.model.name_or_path


def test_a_retrieval_role_without_a_retriever(make_cfg):
    cfg = make_cfg("task=medqa", "policy=reader")  # the medqa task configures no retriever
    with pytest.raises(ConfigError, match="add retrieval=bm25"):
        check_settings(cfg)


def test_the_kl_reference_from_a_saved_adapter(make_cfg, tmp_path):
    cfg = make_cfg("hardware=[cpu,lora]", "algo.kl_beta=0.1")
    saved = load_reference_source(cfg, tmp_path / "reference")
    cfg.algo.ref_model_path = str(saved)
    reference = load_reference(cfg, check_settings(cfg))
    assert all(not p.requires_grad for p in reference.parameters())
    assert not reference.training
    tensors = dict(reference.named_parameters())
    assert any("lora_B" in name and tensors[name].abs().sum() > 0 for name in tensors)
    unset = make_cfg("hardware=[cpu,lora]", "algo.kl_beta=0.1")
    assert load_reference(unset, check_settings(unset)) is None


def load_reference_source(cfg, folder):
    """A LoRA adapter with non-zero weights, saved where a trained run would leave it."""
    lm = build(cfg.model)
    for name, parameter in lm.named_parameters():
        if "lora_B" in name:
            parameter.data.fill_(0.01)
    return lm.save(folder, merge=False)


@pytest.mark.parametrize(
    ("content", "error", "message"),
    [
        (None, MissingFileError, "retrieval.corpus: no file or folder"),
        ("", Exception, "no documents"),
        ('{"id": "a", "title": "T", "content": "x"}\n{"id": "b", "title": "T"', Exception, ":2"),
    ],
    ids=["missing", "empty", "malformed-line"],
)
def test_a_bad_corpus_fails_before_any_model_loads(make_cfg, tmp_path, content, error, message):
    corpus = tmp_path / "corpus.jsonl"
    if content is not None:
        corpus.write_text(content)
    cfg = make_cfg(*READER, f"retrieval.corpus={corpus}")
    with pytest.raises(error, match=message) as raised:
        build_run_parts(cfg)
    assert isinstance(raised.value, UserError)
    assert "\n" not in str(raised.value)


def test_a_missing_unseen_textbook_is_named_by_its_key_before_any_model_loads(
    make_cfg, tmp_path, rewriter, unseen
):
    missing = tmp_path / "no_textbook.jsonl"
    cfg = make_cfg(*rewriter, *unseen, f"data.unseen.corpus={missing}")
    with pytest.raises(MissingFileError, match=r"^data.unseen.corpus: no file or folder at"):
        build_run_parts(cfg)


def test_the_rewriter_task_holds_an_unseen_split_apart_by_kind_and_textbook(make_cfg):
    cfg = make_cfg("task=medqa_rewriter", tiny=False)
    assert cfg.data.unseen.path.endswith("medqa_findings_unseen.jsonl")
    assert cfg.data.unseen.corpus.endswith("findings_unseen_textbook.jsonl")
    assert cfg.data.unseen.corpus != cfg.retrieval.corpus
    assert cfg.retrieval.bm25.repeated_terms == "once"
    assert set(cfg.reward.functions) == {"accuracy", "gold_probability", "gold_rank"}


def test_the_original_base_model_composes(make_cfg, monkeypatch):
    monkeypatch.setattr("src.runs.settings.visible_cuda_devices", lambda: 1)  # as on a GPU node
    cfg = make_cfg(
        "task=medqa_rewriter_smollm2", "model=gemma2_9b_it", "hardware=[gpu]", tiny=False
    )
    check_settings(cfg)
    assert cfg.model.name_or_path == "google/gemma-2-9b-it"
    assert cfg.model.lora.r == 16 and cfg.model.lora.lora_alpha == 32
    assert cfg.model.dtype == "bfloat16" and cfg.trainer.precision == "bf16-true"


def test_the_rewriter_task_is_the_gemma_base_model_recipe_and_smollm2_an_option(make_cfg):
    gemma = make_cfg("task=medqa_rewriter", tiny=False)
    assert gemma.model.offline_fallback.copy_of == "google/gemma-3-270m"
    assert not gemma.policy.use_chat_template and gemma.rollout.stop_strings == ["\n"]
    assert "{plan}" not in gemma.policy.template  # the planner is not asked
    assert gemma.policy.template.endswith("Question: {question}\nTextbook terms:")
    smollm2 = make_cfg("task=medqa_rewriter_smollm2", tiny=False)
    assert smollm2.task_name == gemma.task_name == "medqa_rewriter"
    assert "SmolLM2" in smollm2.model.name_or_path and "{plan}" in smollm2.policy.template


def test_the_planned_variant_shows_a_plan_in_every_worked_example_and_asks_for_one(make_cfg):
    cfg = make_cfg("experiment=rewriter_gemma_planned", tiny=False)
    row = {"question": "Which enzyme?", "options_text": "A. one\nB. two"}
    plan_prompt = cfg.policy.plan_template.format(**row) + cfg.policy.plan_prefix
    assert plan_prompt.endswith('Which enzyme?\nA. one\nB. two\nPlan: {"topic": "')
    plan = '{"topic": "glycogen storage", "facts_needed": []}'
    prompt = cfg.policy.template.format(**row, plan=plan)
    assert prompt.endswith(f"Question: Which enzyme?\nPlan: {plan}\nTextbook terms:")
    examples = prompt.split("\n\n")[:-1]
    assert len(examples) == 3
    for example in examples:
        question, shown, terms = example.split("\n")
        assert question.startswith("Question: ") and terms.startswith("Textbook terms: ")
        assert json.loads(shown.removeprefix("Plan: "))["facts_needed"]  # a plan, as JSON
