"""Dealing a multiple-choice row's options afresh at every draw (`data.shuffle_options`)."""

from __future__ import annotations

import random
from collections import Counter
from pathlib import Path

import pytest

from src.data.datamodule import PromptDataModule
from src.data.mcq import shuffle_options
from src.data.medqa import MedQA
from src.utils.errors import ConfigError
from tests.helpers.files import write_jsonl

ROW_RAW = {
    "question": "A 30-year-old man has wrist drop. Which nerve is damaged?",
    "options": {"A": "Ulnar", "B": "Radial", "C": "Median", "D": "Axillary"},
    "answer_idx": "B",
}
ROW = MedQA()(ROW_RAW)


def test_dealt_row_keeps_its_answer_and_moves_every_letter_field() -> None:
    dealt = shuffle_options(ROW, random.Random(0))
    assert sorted(dealt["options"].values()) == sorted(ROW["options"].values())
    assert dealt["options"][dealt["answer"]] == "Radial" == dealt["answer_text"]
    assert all(dealt[letter] == text for letter, text in dealt["options"].items())
    assert dealt["options_text"].splitlines() == [f"{k}. {v}" for k, v in dealt["options"].items()]
    assert dealt["question"] == ROW["question"]
    assert ROW["options"]["B"] == "Radial" and ROW["answer"] == "B"  # the row itself is untouched


def test_gold_letter_is_spread_over_the_positions() -> None:
    rng = random.Random(1)
    golds = Counter(shuffle_options(ROW, rng)["answer"] for _ in range(400))
    assert set(golds) == {"A", "B", "C", "D"}
    assert min(golds.values()) > 60  # about 100 each; one fixed letter would be 400


def module(
    tmp_path: Path, shuffle: bool, seed: int = 0, oracle_share: float = 0.0
) -> PromptDataModule:
    rows = [{**ROW_RAW, "question": f"Question {i}?"} for i in range(12)]
    path = write_jsonl(tmp_path / "q.jsonl", rows)
    data = PromptDataModule(
        path=str(path),
        schema=MedQA(),
        required_fields=[],
        val_size=4,
        batch_size=4,
        num_batches=6,
        seed=seed,
        shuffle_options=shuffle,
        oracle_share=oracle_share,
    )
    data.prepare_rows()
    return data


def drawn(data: PromptDataModule) -> list[dict]:
    return [row for batch in data.train_dataloader() for row in batch]


def test_training_draws_deal_the_options_and_held_out_rows_keep_theirs(tmp_path: Path) -> None:
    data = module(tmp_path, shuffle=True)
    rows = drawn(data)
    assert len(rows) == 24
    assert all(row["options"][row["answer"]] == "Radial" for row in rows)
    assert len({row["answer"] for row in rows}) > 1
    assert all(row["answer"] == "B" for row in data.val_rows)
    plain = drawn(module(tmp_path, shuffle=False))
    assert [row["question"] for row in plain] == [row["question"] for row in rows]  # same order
    assert all(row["answer"] == "B" for row in plain)


def test_the_deal_depends_only_on_the_seed_and_the_draw(tmp_path: Path) -> None:
    first = [row["options_text"] for row in drawn(module(tmp_path, shuffle=True))]
    again = [row["options_text"] for row in drawn(module(tmp_path, shuffle=True))]
    other = [row["options_text"] for row in drawn(module(tmp_path, shuffle=True, seed=5))]
    assert first == again and first != other
    data = module(tmp_path, shuffle=True)
    loader = data.train_dataloader()
    loader.batch_sampler.resume_at(0, 2)  # a resumed run deals what an uninterrupted one would
    assert [row["options_text"] for batch in loader for row in batch] == first[8:]


def test_rows_without_options_are_a_one_line_error(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "plain.jsonl", [{"question": "1+1?", "answer": "2"}] * 8)
    data = PromptDataModule(path=str(path), val_size=2, shuffle_options=True)
    with pytest.raises(ConfigError, match=r"data.shuffle_options=true needs multiple-choice rows"):
        data.prepare_rows()


def test_an_oracle_share_marks_that_share_of_training_draws_and_leaves_the_deal_alone(
    tmp_path: Path,
) -> None:
    """`data.oracle_share` marks draws `oracle` (a searcher then reads their gold passage):
    about that share of them, the same ones for a seed and a resumed run, never a held-out row,
    and with the options dealt as without a share."""
    rows = drawn(module(tmp_path, shuffle=True, oracle_share=0.5))
    marks = [row["oracle"] for row in rows]
    assert 0 < sum(marks) < len(marks)
    again = drawn(module(tmp_path, shuffle=True, oracle_share=0.5))
    assert [row["oracle"] for row in again] == marks
    without = drawn(module(tmp_path, shuffle=True))
    assert [row["options_text"] for row in rows] == [row["options_text"] for row in without]
    assert all("oracle" not in row for row in without)
    everyone = drawn(module(tmp_path, shuffle=False, oracle_share=1.0))
    assert all(row["oracle"] for row in everyone) and all(row["answer"] == "B" for row in everyone)
    data = module(tmp_path, shuffle=True, oracle_share=0.5)
    assert all("oracle" not in row for row in data.val_rows)
    loader = data.train_dataloader()
    loader.batch_sampler.resume_at(0, 2)
    assert [row["oracle"] for batch in loader for row in batch] == marks[8:]


@pytest.mark.parametrize("share", [-0.1, 1.5])
def test_an_oracle_share_outside_0_to_1_is_named(tmp_path: Path, share: float) -> None:
    with pytest.raises(ConfigError, match=r"data.oracle_share must be a number in \[0, 1\]"):
        module(tmp_path, shuffle=False, oracle_share=share)
