"""MedMCQA and MedQA loading: the shipped samples, cleaning, and bad rows named by file and line."""

from __future__ import annotations

from pathlib import Path

import pytest

from src.data.datamodule import PromptDataModule
from src.data.files import DataFileError, read_rows
from src.data.hub import SAMPLES_DIR, hub_splits
from src.data.mcq import clean_rows
from src.data.medmcqa import MedMCQA
from src.data.medqa import MedQA
from tests.helpers.declared import refusal
from tests.helpers.files import write_jsonl

MEDMCQA_ROW = {
    "id": "x1",
    "question": "Wrist drop follows injury to which nerve?",
    "opa": "Ulnar",
    "opb": "Radial",
    "opc": "Median",
    "opd": "Axillary",
    "cop": 1,
    "choice_type": "single",
    "exp": "The radial nerve supplies the wrist extensors.",
    "subject_name": "Anatomy",
    "topic_name": "Upper limb",
}
MEDQA_ROW = {
    "question": "A 30-year-old man has wrist drop. Which nerve is damaged?",
    "options": {"A": "Ulnar", "B": "Radial", "C": "Median", "D": "Axillary"},
    "answer_idx": "B",
    "answer": "Radial",
    "meta_info": "step1",
}


def test_medmcqa_row_becomes_canonical() -> None:
    row = MedMCQA()(MEDMCQA_ROW)
    assert row["answer"] == "B" and row["answer_text"] == "Radial"
    assert row["options"] == {"A": "Ulnar", "B": "Radial", "C": "Median", "D": "Axillary"}
    assert row["options_text"].splitlines()[1] == "B. Radial"
    assert row["explanation"].startswith("The radial nerve")
    assert (row["subject"], row["topic"], row["choice_type"]) == ("Anatomy", "Upper limb", "single")


def test_one_based_labels_by_config() -> None:
    assert MedMCQA(label_base=1)({**MEDMCQA_ROW, "cop": 2})["answer"] == "B"
    said = refusal({"data.schema.label_base": 2})
    assert said == "data.schema.label_base must be one of 0, 1, got 2"


def test_medqa_row_becomes_canonical() -> None:
    row = MedQA()(MEDQA_ROW)
    assert (row["answer"], row["answer_text"], row["explanation"]) == ("B", "Radial", "")


def test_shipped_samples_load_clean() -> None:
    for name, schema in (("medmcqa_sample.jsonl", MedMCQA()), ("medqa_sample.jsonl", MedQA())):
        rows = read_rows(SAMPLES_DIR / name)
        kept, dropped = clean_rows(rows, schema, name)
        assert len(rows) >= 150 and len(kept) == len(rows) and dropped == {}
        assert {row["answer"] for row in kept} == set("ABCD")  # the gold letter is not constant


def test_incomplete_rows_are_dropped_and_counted(tmp_path: Path) -> None:
    path = write_jsonl(
        tmp_path / "m.jsonl",
        [
            MEDMCQA_ROW,
            {**MEDMCQA_ROW, "opc": ""},  # missing option
            {**MEDMCQA_ROW, "opd": None},  # missing option
            {**MEDMCQA_ROW, "question": "  "},  # missing question
            {**MEDMCQA_ROW, "cop": -1},  # withheld label, as in the hub's test split
            {k: v for k, v in MEDMCQA_ROW.items() if k != "cop"},  # missing label
        ],
    )
    kept, dropped = clean_rows(read_rows(path), MedMCQA(), str(path))
    assert len(kept) == 1
    assert dropped == {"missing option": 2, "missing question": 1, "missing label": 2}


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        ({"cop": 7}, "cop=7 is out of range: with data.schema.label_base=0 labels run 0-3"),
        ({"cop": "b"}, "cop='b' is not an integer option label"),
        ({"cop": 1.5}, "cop=1.5 is not an integer option label"),
    ],
)
def test_wrong_labels_name_file_and_line(tmp_path: Path, bad: dict, message: str) -> None:
    path = write_jsonl(tmp_path / "m.jsonl", [MEDMCQA_ROW, MEDMCQA_ROW, {**MEDMCQA_ROW, **bad}])
    with pytest.raises(DataFileError) as error:
        clean_rows(read_rows(path), MedMCQA(), str(path))
    assert str(error.value) == f"{path}:3: {message}"


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        ({"answer_idx": "E"}, "answer_idx='E' is not one of ['A', 'B', 'C', 'D']"),
        ({"answer": "Ulnar"}, "answer 'Ulnar' contradicts answer_idx=B ('Radial')"),
        (
            {"options": ["Ulnar", "Radial"]},
            "options must be an object of letter -> text, got list",
        ),
        (
            {"options": {**MEDQA_ROW["options"], "E": "x"}},
            "options has keys ['E']; expected ['A', 'B', 'C', 'D']",
        ),
    ],
)
def test_medqa_wrong_rows_name_file_and_line(tmp_path: Path, bad: dict, message: str) -> None:
    path = write_jsonl(tmp_path / "q.jsonl", [MEDQA_ROW, {**MEDQA_ROW, **bad}])
    with pytest.raises(DataFileError) as error:
        clean_rows(read_rows(path), MedQA(), str(path))
    assert str(error.value) == f"{path}:2: {message}"


def test_broken_json_line_is_named(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "m.jsonl", [MEDMCQA_ROW, '{"question": "unfinished', MEDMCQA_ROW])
    with pytest.raises(DataFileError, match=r"m\.jsonl:2: malformed JSON line"):
        PromptDataModule(path=str(path), schema=MedMCQA(), required_fields=[]).prepare_rows()


def test_datamodule_reports_drops_and_splits(tmp_path: Path) -> None:
    rows = [{**MEDMCQA_ROW, "id": str(i)} for i in range(20)] + [{**MEDMCQA_ROW, "opa": None}]
    path = write_jsonl(tmp_path / "m.jsonl", rows)
    data = PromptDataModule(path=str(path), schema=MedMCQA(), required_fields=[], val_size=5)
    data.prepare_rows()
    assert (len(data.train_rows), len(data.val_rows)) == (15, 5)
    assert data.report["all"] == {"rows": 21, "kept": 20, "dropped": {"missing option": 1}}
    assert data.train_rows[0]["answer"] == "B"


def test_hub_unreachable_falls_back_to_the_sample() -> None:
    loaded = hub_splits("openlifescienceai/medmcqa", {"train": "train"}, "medmcqa_sample.jsonl")
    assert loaded["source"] == "sample:medmcqa_sample.jsonl"
    assert loaded["all"][0]["_file"].endswith("medmcqa_sample.jsonl")
    with pytest.raises(FileNotFoundError, match="data.path=FILE"):
        hub_splits("openlifescienceai/medmcqa", {"train": "train"}, None)


def test_a_file_whose_every_row_is_dropped_says_why(tmp_path: Path) -> None:
    """Rows without options: the one line names the file and the cause, never a remedy for a
    held-out split that is merely too large."""
    rows = [{"question": f"Q{n}?", "answer_idx": "A", "answer": "x"} for n in range(6)]
    path = write_jsonl(tmp_path / "no_options.jsonl", rows)
    module = PromptDataModule(path=str(path), schema=MedQA(), required_fields=[], val_size=2)
    with pytest.raises(DataFileError) as caught:
        module.prepare_rows()
    message = str(caught.value)
    assert message.startswith(f"{path}: every one of its 6 rows was dropped (6 missing ")
    assert "val_size" not in message and "\n" not in message
