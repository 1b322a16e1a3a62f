"""Local data files: every format, and errors that name the file and line."""

import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from src.data.arithmetic import arithmetic_problems
from src.data.datamodule import PromptDataModule
from src.data.files import DataFileError, read_rows, require_fields

ROWS = [{"question": f"What is {i} + 1?", "answer": str(i + 1)} for i in range(10)]


def test_reads_json_jsonl_and_parquet(tmp_path):
    (tmp_path / "a.json").write_text(json.dumps(ROWS))
    (tmp_path / "b.json").write_text(json.dumps({"data": ROWS}))
    (tmp_path / "c.jsonl").write_text("\n".join(json.dumps(r) for r in ROWS) + "\n\n")
    pq.write_table(pa.Table.from_pylist(ROWS), tmp_path / "d.parquet")
    for name in ("a.json", "b.json", "c.jsonl", "d.parquet"):
        rows = read_rows(tmp_path / name)
        assert [(r["question"], r["answer"]) for r in rows] == [
            (r["question"], r["answer"]) for r in ROWS
        ]


@pytest.mark.parametrize(
    ("name", "content", "message"),
    [
        ("empty.jsonl", "", "empty.jsonl: data file holds no rows"),
        ("blank.json", "  \n", "blank.json: data file holds no rows"),
        (
            "bad.jsonl",
            '{"question": "q", "answer": "1"}\n\n{"question": \n',
            "bad.jsonl:3: malformed JSON line",
        ),
        (
            "list.jsonl",
            '{"question": "q", "answer": "1"}\n[1, 2]\n',
            "list.jsonl:2: expected a JSON object",
        ),
        ("bad.json", '[{"question": "q",\n "answer": }]', "bad.json:2: malformed JSON"),
        ("scalar.json", "[1, 2]", "scalar.json: expected a list of JSON objects"),
        ("rows.csv", "question,answer\n", "unsupported data file type '.csv'"),
    ],
)
def test_bad_files_name_file_and_line(tmp_path, name, content, message):
    (tmp_path / name).write_text(content)
    with pytest.raises(DataFileError, match=message.replace("(", r"\(").replace("[", r"\[")):
        read_rows(tmp_path / name)


def test_missing_file_is_named(tmp_path):
    with pytest.raises(DataFileError, match="nowhere.jsonl: data file not found"):
        read_rows(tmp_path / "nowhere.jsonl")


@pytest.mark.parametrize("encoding", ["utf-16", "utf-16-le", "utf-8-sig", "utf-32"])
@pytest.mark.parametrize("name", ["rows.jsonl", "rows.json"])
def test_files_exported_as_utf16_or_with_a_bom_are_read(tmp_path, encoding, name):
    """Spreadsheet tools export UTF-16 (with a byte-order mark, or without as utf-16-le)."""
    rows = [{"question": "¿Qué es 2 + 2?", "answer": "4"}, {"question": "q2", "answer": "é"}]
    if name.endswith(".jsonl"):
        text = "\r\n".join(json.dumps(row, ensure_ascii=False) for row in rows) + "\r\n"
    else:
        text = json.dumps(rows, ensure_ascii=False)
    (tmp_path / name).write_bytes(text.encode(encoding))
    read = read_rows(tmp_path / name)
    assert [{k: v for k, v in row.items() if k != "_line"} for row in read] == rows
    if name.endswith(".jsonl"):
        assert [row["_line"] for row in read] == [1, 2]


def test_a_file_in_another_encoding_is_refused_in_one_line(tmp_path):
    path = tmp_path / "latin1.jsonl"
    path.write_bytes('{"question": "Qu\u00e9?", "answer": "4"}\n'.encode("latin-1"))
    with pytest.raises(
        DataFileError,
        match=r"latin1.jsonl: not UTF-8, UTF-16 or UTF-32 text "
        r"\(byte 0xe9 at offset 16 is not utf-8\); save the file as UTF-8",
    ):
        read_rows(path)


def test_a_folder_is_not_a_data_file(tmp_path):
    with pytest.raises(DataFileError, match="is a folder, not a data file"):
        read_rows(tmp_path)


def test_missing_field_names_the_line(tmp_path):
    path = tmp_path / "rows.jsonl"
    path.write_text('{"question": "q", "answer": "1"}\n{"question": "q2", "answer": ""}\n')
    with pytest.raises(DataFileError, match=r"rows.jsonl: line 2: missing field\(s\) \['answer'\]"):
        require_fields(read_rows(path), ["question", "answer"], str(path))


def test_arithmetic_problems_are_correct_and_seeded():
    rows = arithmetic_problems(seed=3, operations="+-")
    assert len(rows) == 2 * 90 * 90
    for row in rows[:50]:
        a, op, b = row["question"].removeprefix("What is ").removesuffix("?").split()
        assert int(row["answer"]) == (int(a) + int(b) if op == "+" else int(a) - int(b))
    assert rows == arithmetic_problems(seed=3, operations="+-")
    assert rows != arithmetic_problems(seed=4, operations="+-")
    with pytest.raises(ValueError, match="data.operations"):
        arithmetic_problems(operations="/")


def test_held_out_split_is_disjoint_and_sized():
    module = PromptDataModule(
        source=lambda: arithmetic_problems(seed=0), val_size=256, batch_size=4, num_batches=3
    )
    module.setup()
    assert len(module.val_rows) == 256
    held_out = {r["question"] for r in module.val_rows}
    assert not held_out & {r["question"] for r in module.train_rows}
    batches = list(module.train_dataloader())
    assert len(batches) == 3 and all(len(b) == 4 for b in batches)
    assert [len(b) for b in module.val_dataloader()] == [64, 64, 64, 64]


def held_out_questions(path, seed: int) -> list[str]:
    module = PromptDataModule(path=str(path), val_size=10, seed=seed)
    module.setup()
    return [row["question"] for row in module.val_rows]


def test_held_out_split_of_a_file_depends_only_on_the_seed(tmp_path):
    path = tmp_path / "rows.jsonl"
    rows = [{"question": f"What is {i} + 1?", "answer": str(i + 1)} for i in range(100)]
    path.write_text("\n".join(json.dumps(r) for r in rows))
    first = held_out_questions(path, seed=3)
    assert held_out_questions(path, seed=3) == first  # a second build holds out the same rows
    assert first != [row["question"] for row in rows[:10]]  # shuffled, not the file's head
    assert held_out_questions(path, seed=4) != first  # the comparison above can fail


def test_too_small_file_fails_with_the_file_named(tmp_path):
    path = tmp_path / "few.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in ROWS[:3]))
    module = PromptDataModule(path=str(path), val_size=3)
    with pytest.raises(DataFileError, match="few.jsonl: no training rows left"):
        module.setup()
