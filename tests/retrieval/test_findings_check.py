"""The rewriter's second question set: up to date with its script, written as the findings
sample is but over other kinds of answer, and kept out of training (no config reads it)."""

from __future__ import annotations

import json
import random
from pathlib import Path

from scripts import make_findings_check as check
from scripts import make_findings_sample as sample

ROOT = Path(__file__).resolve().parents[2]


def rows(path):
    return [json.loads(line) for line in path.open()]


def test_the_shipped_files_are_what_the_script_writes():
    written = sample.questions(
        random.Random(check.SEED), check.ANSWERS, check.KINDS, check.FINDINGS
    )
    assert rows(check.SAMPLE) == written
    assert rows(check.CORPUS) == sample.corpus(check.ANSWERS, check.KINDS, check.FINDINGS)


def test_its_kinds_answers_and_questions_are_none_of_the_samples():
    assert not set(check.KINDS) & set(sample.KINDS)
    ours = {row["answer"].lower() for row in rows(check.SAMPLE)}
    assert not ours & {row["answer"].lower() for row in rows(sample.SAMPLE)}
    assert not {row["question"] for row in rows(check.SAMPLE)} & {
        row["question"] for row in rows(sample.SAMPLE)
    }


def test_each_answer_is_in_one_passage_and_no_vignette_names_it():
    passages = rows(check.CORPUS)
    for row in rows(check.SAMPLE):
        answer = row["answer"].lower()
        assert sum(answer in passage["content"].lower() for passage in passages) == 1
        assert answer not in row["question"].lower()
        assert row["options"][row["answer_idx"]] == row["answer"]


def test_no_config_trains_on_it():
    name = check.SAMPLE.name
    assert not [path for path in (ROOT / "conf").rglob("*.yaml") if name in path.read_text()]


def test_the_question_alone_finds_its_passage_less_often_than_with_the_options():
    shares = sample.recall(rows(check.SAMPLE), 3, check.CORPUS)
    assert shares["question"] <= 0.5
    assert shares["question"] + 0.2 < shares["question with its options"]
    assert shares["question with its options"] + 0.2 < shares["answer"]
