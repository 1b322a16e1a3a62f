"""The rewriter's unseen split: up to date with its script, of kinds neither the training sample
nor the second set holds, over a textbook of its own, and read by the rewriter task only as the
unseen split (never as training rows)."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from scripts import make_findings_check as check
from scripts import make_findings_sample as sample
from scripts import make_findings_unseen as unseen

ROOT = Path(__file__).resolve().parents[2]


def rows(path):
    return [json.loads(line) for line in path.open()]


def test_the_shipped_files_are_what_the_script_writes():
    written = sample.questions(
        random.Random(unseen.SEED), unseen.ANSWERS, unseen.KINDS, unseen.FINDINGS
    )
    assert rows(unseen.SAMPLE) == written
    assert rows(unseen.CORPUS) == sample.corpus(unseen.ANSWERS, unseen.KINDS, unseen.FINDINGS)


def test_no_kind_answer_question_or_passage_is_shared_with_training_or_the_second_set():
    kinds = {row["meta_info"] for row in rows(unseen.SAMPLE)}
    for other in (sample, check):
        assert not set(unseen.KINDS) & set(other.KINDS)
        assert not kinds & {row["meta_info"] for row in rows(other.SAMPLE)}
        answers = {row["answer"].lower() for row in rows(other.SAMPLE)}
        assert not {row["answer"].lower() for row in rows(unseen.SAMPLE)} & answers
        passages = {passage["content"] for passage in rows(other.CORPUS)}
        answering = {p["content"] for p in rows(unseen.CORPUS) if p["id"].startswith("answer-")}
        assert not answering & passages


def test_its_textbook_words_its_passages_unlike_the_training_textbook():
    ours = {template for _, template in unseen.KINDS.values()}
    theirs = {template for _, template in sample.KINDS.values()}
    first_words = {template.split("{answer}")[0] for template in theirs}
    assert not ours & theirs
    assert all(template.split("{answer}")[0] not in first_words for template in ours)


def test_each_answer_is_in_one_passage_and_no_vignette_names_it():
    passages = rows(unseen.CORPUS)
    for row in rows(unseen.SAMPLE):
        answer = row["answer"].lower()
        assert sum(answer in passage["content"].lower() for passage in passages) == 1
        assert answer not in row["question"].lower()


def test_only_the_unseen_split_of_the_gemma_retrieval_tasks_reads_it():
    name = unseen.SAMPLE.name
    readers = [path for path in (ROOT / "conf").rglob("*.yaml") if name in path.read_text()]
    assert sorted(path.name for path in readers) == ["medqa_rewriter.yaml", "medqa_searcher.yaml"]
    for reader in readers:
        lines = [line for line in reader.read_text().splitlines() if name in line]
        assert len(lines) == 1 and lines[0].strip().startswith("path:")  # data.unseen.path


def test_the_question_alone_finds_its_passage_less_often_than_with_the_options():
    shares = sample.recall(rows(unseen.SAMPLE), 3, unseen.CORPUS)
    assert shares["question"] <= 0.5
    assert shares["question"] + 0.2 < shares["question with its options"]
    assert shares["question with its options"] + 0.2 < shares["answer"]


def test_group_room_counts_groups_with_a_completion_on_top_and_named_findings(tmp_path):
    """scripts/group_room.py on a hand-made samples table: two groups of two completions."""
    import json

    from scripts.group_room import groups, names_findings, room
    from scripts.make_findings_unseen import ANSWERS, SAMPLE

    row = json.loads(SAMPLE.open().readline())
    finding = next(
        f
        for kind in ANSWERS.values()
        for f in kind.get(row["answer"], [])
        if f.lower() not in row["question"].lower()
    )
    prompt = f"Question: {row['question']}\nTextbook terms:"
    table = {
        "columns": ["prompt", "completion", "gold_reciprocal_rank"],
        "data": [
            [prompt, f" {finding}, fever", 1.0],
            [prompt, " vasculitis", 0.5],
            [prompt + " ", " vasculitis", 0.25],  # another prompt: a group whose ranks tie
            [prompt + " ", " vasculitis", 0.25],
        ],
    }
    folder = tmp_path / "RUN" / "artifacts" / "samples"
    folder.mkdir(parents=True)
    (folder / "step_000001.json").write_text(json.dumps(table))
    found = groups("RUN", tmp_path)
    assert room(found) == {
        "groups": 2.0,
        "some completion on top": 0.5,
        "completions on top": 0.25,  # (1/2 + 0/2) / 2
        "groups whose ranks differ": 0.5,
    }
    assert names_findings(found, "unseen") == 0.25  # one completion of four names a finding


def test_group_room_on_a_run_of_a_task_without_ranks_says_what_to_give(tmp_path):
    import json

    from scripts.group_room import groups

    table = {
        "columns": ["prompt", "completion", "accuracy"],
        "data": [["What is 1 + 1?", "2", 1.0]],
    }
    folder = tmp_path / "RUN" / "artifacts" / "samples"
    folder.mkdir(parents=True)
    (folder / "step_000001.json").write_text(json.dumps(table))
    with pytest.raises(
        SystemExit, match="has no gold_reciprocal_rank column .* task=medqa_rewriter"
    ):
        groups("RUN", tmp_path)
    with pytest.raises(SystemExit, match="no run NORUN in .*; give a run's MLflow id"):
        groups("NORUN", tmp_path)
    (tmp_path / "EMPTY").mkdir()
    with pytest.raises(SystemExit, match="no samples tables under .*samples_every_n_steps=1"):
        groups("EMPTY", tmp_path)
