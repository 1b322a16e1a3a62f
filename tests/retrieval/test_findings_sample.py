"""The rewriter's training sample: up to date with its script, and a sample where a rewriter has
room, as with real MedQA vignettes over a textbook: the question alone seldom puts its gold
passage in BM25's top 3, the question with its options more often, the answer nearly always."""

from __future__ import annotations

import importlib.util
import json
from types import ModuleType

import pytest

from src.utils.resolvers import PROJECT_ROOT


@pytest.fixture(scope="module")
def script() -> ModuleType:
    path = PROJECT_ROOT / "scripts" / "make_findings_sample.py"
    spec = importlib.util.spec_from_file_location("make_findings_sample", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_shipped_files_are_what_the_script_writes(script):
    import random

    rows = script.questions(random.Random(script.SEED))
    assert [json.loads(line) for line in script.SAMPLE.open()] == rows
    assert [json.loads(line) for line in script.CORPUS.open()] == script.corpus()


def test_no_vignette_names_its_answer_and_every_option_has_a_passage(script):
    titles = {json.loads(line)["title"] for line in script.CORPUS.open()}
    for line in script.SAMPLE.open():
        row = json.loads(line)
        assert row["answer"].lower() not in row["question"].lower()
        assert row["options"][row["answer_idx"]] == row["answer"]
        assert set(row["options"].values()) <= titles


def test_the_question_alone_seldom_finds_its_passage(script):
    rows = [json.loads(line) for line in script.SAMPLE.open()]
    shares = script.recall(rows, 3)
    assert shares["question"] <= 0.5
    assert shares["question"] + 0.2 < shares["question with its options"]
    assert shares["question with its options"] + 0.2 < shares["answer"]
    print({name: round(share, 3) for name, share in shares.items()})
