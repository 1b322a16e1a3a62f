"""The unseen split: rows of kinds never trained on, from their own file, held out beside the
held-out rows; a kind in both halves is refused in one line naming the file."""

from __future__ import annotations

from pathlib import Path

import pytest

from src.data.datamodule import PromptDataModule, kinds
from src.data.files import DataFileError
from src.data.medqa import MedQA
from src.utils.errors import ConfigError
from tests.helpers.files import write_jsonl


def medqa_rows(kind: str, count: int) -> list[dict]:
    return [
        {
            "question": f"A {kind} question {n}?",
            "options": {"A": "one", "B": "two", "C": "three", "D": "four"},
            "answer_idx": "B",
            "answer": "two",
            "meta_info": kind,
        }
        for n in range(count)
    ]


def data(tmp_path: Path, train: list[dict], unseen: list[dict], **keys) -> PromptDataModule:
    train_path = write_jsonl(tmp_path / "train.jsonl", train)
    unseen_path = write_jsonl(tmp_path / "unseen.jsonl", unseen)
    return PromptDataModule(
        path=str(train_path),
        schema=MedQA(),
        required_fields=[],
        val_size=4,
        unseen={"path": str(unseen_path), "corpus": "textbook.jsonl"},
        **keys,
    )


def test_the_split_by_kind_leaves_no_kind_in_both_halves(tmp_path: Path) -> None:
    train = medqa_rows("enzyme", 10) + medqa_rows("vitamin", 10)
    module = data(tmp_path, train, medqa_rows("valve", 6) + medqa_rows("stone", 3))
    module.prepare_rows()
    seen = kinds(module.train_rows) | kinds(module.val_rows)
    assert kinds(module.unseen_rows) == {"valve", "stone"}
    assert not kinds(module.unseen_rows) & seen
    assert module.split_rows("unseen") == module.unseen_rows
    assert module.settings.unseen_corpus == "textbook.jsonl"
    assert module.held_out_splits() == ["validation", "unseen"]
    assert len(module.val_dataloader()) == 2
    assert module.report["unseen_rows"] == 9


def test_the_unseen_rows_are_capped_as_the_held_out_rows(tmp_path: Path) -> None:
    module = data(tmp_path, medqa_rows("enzyme", 12), medqa_rows("valve", 9), max_val_rows=3)
    module.prepare_rows()
    assert len(module.unseen_rows) == 3 and len(module.val_rows) == 3


def test_a_kind_in_both_files_is_refused_naming_the_file_and_kind(tmp_path: Path) -> None:
    module = data(tmp_path, medqa_rows("enzyme", 10), medqa_rows("enzyme", 2))
    with pytest.raises(DataFileError, match=r"unseen\.jsonl: kinds \['enzyme'\] are also in"):
        module.prepare_rows()


def test_without_an_unseen_split_there_is_one_held_out_loader(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "train.jsonl", medqa_rows("enzyme", 10))
    module = PromptDataModule(path=str(path), schema=MedQA(), required_fields=[], val_size=4)
    module.prepare_rows()
    assert module.held_out_splits() == ["validation"]
    assert not isinstance(module.val_dataloader(), list)
    with pytest.raises(ConfigError, match="eval.split=unseen needs data.unseen.path"):
        module.split_rows("unseen")


def test_an_unknown_unseen_key_is_refused() -> None:
    with pytest.raises(ConfigError, match=r"data.unseen: unknown key\(s\) \['rows'\]"):
        PromptDataModule(path="x.jsonl", unseen={"rows": "x"})


def by_kinds(tmp_path: Path, rows: list[dict], kinds_out: list[str]) -> PromptDataModule:
    path = write_jsonl(tmp_path / "all.jsonl", rows)
    module = PromptDataModule(
        path=str(path), schema=MedQA(), required_fields=[], val_size=4, unseen={"kinds": kinds_out}
    )
    module.prepare_rows()
    return module


def test_kinds_taken_out_of_the_data_are_neither_trained_on_nor_held_out(tmp_path: Path) -> None:
    rows = medqa_rows("enzyme", 10) + medqa_rows("vitamin", 10) + medqa_rows("valve", 5)
    module = by_kinds(tmp_path, rows, ["valve"])
    assert kinds(module.unseen_rows) == {"valve"} and len(module.unseen_rows) == 5
    assert "valve" not in kinds(module.train_rows) | kinds(module.val_rows)
    assert len(module.train_rows) + len(module.val_rows) == 20
    assert module.split_rows("unseen") == module.unseen_rows
    assert module.report["unseen_rows"] == 5


def test_a_kind_no_row_holds_beside_one_they_do_is_refused(tmp_path: Path) -> None:
    rows = medqa_rows("enzyme", 10) + medqa_rows("vitamin", 10) + medqa_rows("valve", 5)
    with pytest.raises(DataFileError, match=r"names \['stone'\].*its kinds: enzyme, valve"):
        by_kinds(tmp_path, rows, ["valve", "stone"])


def test_kinds_none_of_the_rows_holds_make_no_unseen_split(tmp_path: Path, caplog) -> None:
    """A task's unseen subjects and a file of other subjects (data.path=FILE): said, not refused."""
    rows = medqa_rows("enzyme", 10) + medqa_rows("vitamin", 10)
    module = by_kinds(tmp_path, rows, ["valve"])
    assert module.unseen_rows == [] and len(module.train_rows) + len(module.val_rows) == 20
    assert "no unseen split; its kinds: enzyme, vitamin" in caplog.text


def test_rows_without_kinds_make_no_unseen_split(tmp_path: Path) -> None:
    rows = [{**row, "meta_info": None} for row in medqa_rows("enzyme", 10)]
    module = by_kinds(tmp_path, rows, ["valve"])
    assert module.unseen_rows == [] and len(module.train_rows) == 6


def test_a_file_and_kinds_together_are_refused() -> None:
    with pytest.raises(ConfigError, match="as a file \\(path\\) or as kinds"):
        PromptDataModule(path="x.jsonl", unseen={"path": "u.jsonl", "kinds": ["valve"]})


def test_the_shipped_recipes_hold_out_kinds_they_never_train_on(make_cfg) -> None:
    """task=medmcqa (subjects) and task=math (CHAMP's problem types): the unseen split's kinds
    are in no training or held-out row."""
    from src.utils.config import build

    for task in ("medmcqa", "math"):
        # every row of the split (math's default preset scores 16 of them)
        cfg = make_cfg(f"task={task}", "model=tiny", "data.max_val_rows=null", tiny=False)
        module = build(cfg.data)
        module.prepare_rows()
        unseen = kinds(module.unseen_rows)
        assert unseen and len(module.unseen_rows) >= 30, task
        assert not unseen & (kinds(module.train_rows) | kinds(module.val_rows)), task
