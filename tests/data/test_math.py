"""data=math: CHAMP from its package, GSM8K files and JSON lists recognised from their rows,
bad rows dropped and counted or named by file and line."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from src.data.files import DataFileError
from src.data.math import MathQA, champ_problems
from src.data.mcq import DropRow
from src.runs.parts import build_run_parts
from src.utils.errors import MissingFileError

GSM8K = [
    {
        "question": "Natalia sold clips to 48 friends in April, and half as many in May. How many in all?",
        "answer": "In May she sold 48/2 = <<48/2=24>>24 clips.\n48+24 = <<48+24=72>>72\n#### 72",
    },
    {"question": "A box holds 1,000 pens. How many?", "answer": "It holds 1,000.\n#### 1,000"},
    {"question": "No final value here?", "answer": "Some working.\n####   "},
    {"question": "", "answer": "#### 3"},
]
LISTED = [
    {
        "question": "Solve 2x = 6.",
        "answer": "Divide by 2: x = 3. The answer is 3.",
        "source": "hand",
    },
    {"question": "What is 1/2 + 1/4?", "answer": "1/2 + 1/4 = 3/4, so \\boxed{\\frac{3}{4}}."},
    {"question": "Prove that there are infinitely many primes.", "answer": "Suppose not ..."},
    {"question": "Missing answer?", "answer": "  "},
]


def write(path: Path, rows: list[dict], jsonl: bool) -> Path:
    text = "\n".join(json.dumps(row) for row in rows) + "\n" if jsonl else json.dumps(rows)
    path.write_text(text)
    return path


def test_champ_is_read_from_its_package_with_answers_and_concepts():
    rows = champ_problems()["all"]
    clean = [MathQA()(row) for row in rows]
    assert len(clean) == 270 and len({row["id"] for row in clean}) == 270
    assert {row["source"].split(":")[0] for row in clean} == {"champ"}
    assert all(row["question"] and row["answer"] for row in clean)
    assert all(row["reference"].endswith(f"The answer is {row['answer']}.") for row in clean)
    first = next(row for row in clean if row["id"] == "P_Combinatorics_1")
    assert first["answer"] == "239" and first["concepts"] == ["rule of sum"]
    assert sum(bool(row["concepts"]) for row in clean) > 200


def test_without_the_champ_package_the_error_says_what_to_install(monkeypatch):
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None)
    with pytest.raises(MissingFileError, match="pip install champ-dataset.*data.path=FILE"):
        champ_problems()


def test_a_gsm8k_row_is_recognised_by_its_final_value():
    row = MathQA()(GSM8K[0])
    assert row["answer"] == "72"
    assert "<<" not in row["reference"] and row["reference"].endswith("#### 72")
    assert MathQA()(GSM8K[1])["answer"] == "1,000"
    with pytest.raises(DropRow, match="no final value after ####"):
        MathQA()(GSM8K[2])


def test_a_listed_answer_is_the_reference_and_states_its_final_value():
    rows = [MathQA()(row) for row in LISTED[:3]]
    assert [row["answer"] for row in rows] == ["3", "\\frac{3}{4}", ""]
    assert rows[0]["reference"] == LISTED[0]["answer"] and rows[0]["source"] == "hand"
    assert MathQA()({**LISTED[2], "final_answer": "none"})["answer"] == "none"
    with pytest.raises(DropRow, match="missing answer"):
        MathQA()(LISTED[3])


@pytest.mark.parametrize("jsonl", [True, False])
def test_data_path_takes_either_format_and_counts_what_it_drops(make_cfg, tmp_path, jsonl):
    path = write(tmp_path / ("rows.jsonl" if jsonl else "rows.json"), GSM8K + LISTED, jsonl)
    cfg = make_cfg("task=math", f"data.path={path}", "data.val_size=2", "trainer.max_steps=2")
    module = build_run_parts(cfg).datamodule
    assert module.report["all"]["kept"] == 5
    assert module.report["all"]["dropped"] == {
        "no final value after ####": 1,
        "missing question": 1,
        "missing answer": 1,
    }
    assert len(module.train_rows) + len(module.val_rows) == 5


def test_rows_without_a_final_value_are_dropped_only_for_the_accuracy_reward(make_cfg, tmp_path):
    path = write(tmp_path / "rows.jsonl", GSM8K[:2] + LISTED[:3], jsonl=True)
    common = ["task=math", f"data.path={path}", "data.val_size=1", "trainer.max_steps=2"]
    kept = build_run_parts(make_cfg(*common)).datamodule
    assert len(kept.train_rows) + len(kept.val_rows) == 5 and "unscorable" not in kept.report
    accuracy = build_run_parts(make_cfg(*common, "reward=accuracy")).datamodule
    assert len(accuracy.train_rows) + len(accuracy.val_rows) == 4
    assert (
        sum(
            accuracy.report["unscorable"][split]["answer"]
            for split in accuracy.report["unscorable"]
        )
        == 1
    )


def test_a_wrong_row_is_named_by_file_and_line(make_cfg, tmp_path):
    path = write(tmp_path / "rows.jsonl", [LISTED[0], {"question": "q", "answer": [1, 2]}], True)
    cfg = make_cfg("task=math", f"data.path={path}", "data.val_size=1")
    with pytest.raises(DataFileError, match=rf"{path}:2: answer must be text or a number"):
        build_run_parts(cfg)
