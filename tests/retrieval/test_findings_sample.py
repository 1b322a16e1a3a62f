"""The rewriter's training sample: up to date with its script, and a sample where a rewriter has
room, as with real MedQA vignettes over a textbook: the question alone seldom puts its gold
passage in BM25's top 3, the question with its options more often, the answer nearly always."""

from __future__ import annotations

import json
import random

from scripts import make_findings_sample as script


def test_the_shipped_files_are_what_the_script_writes():
    rows = script.questions(random.Random(script.SEED))
    assert [json.loads(line) for line in script.SAMPLE.open()] == rows
    assert [json.loads(line) for line in script.CORPUS.open()] == script.corpus()


def test_no_vignette_names_its_answer_and_every_option_has_a_passage():
    titles = {json.loads(line)["title"] for line in script.CORPUS.open()}
    for line in script.SAMPLE.open():
        row = json.loads(line)
        assert row["answer"].lower() not in row["question"].lower()
        assert row["options"][row["answer_idx"]] == row["answer"]
        assert set(row["options"].values()) <= titles


def test_the_question_alone_seldom_finds_its_passage():
    rows = [json.loads(line) for line in script.SAMPLE.open()]
    shares = script.recall(rows, 3)
    assert shares["question"] <= 0.5
    assert shares["question"] + 0.2 < shares["question with its options"]
    assert shares["question with its options"] + 0.2 < shares["answer"]
    print({name: round(share, 3) for name, share in shares.items()})
