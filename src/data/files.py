"""Reading local data files (JSON, JSONL, Parquet) into rows, with errors that name file and line."""

from __future__ import annotations

import io
import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from src.utils.errors import UserError

SUFFIXES = (".json", ".jsonl", ".parquet")
PRIVATE = ("_line", "_file")  # bookkeeping keys the readers add; never written back


class DataFileError(UserError, ValueError):
    """A data file that cannot be used; the message names the file and, where known, the line,
    and the command line prints it as one line."""


def read_rows(path: str | Path) -> list[dict[str, Any]]:
    """All rows of a .json (a list of objects), .jsonl (one object per line) or .parquet file."""
    path = Path(path)
    if path.is_dir():
        raise DataFileError(
            f"{path}: is a folder, not a data file; name one of its {SUFFIXES} files"
        )
    if not path.is_file():
        raise DataFileError(f"{path}: data file not found")
    suffix = path.suffix.lower()
    if suffix == ".jsonl":
        rows = _read_jsonl(path)
    elif suffix == ".json":
        rows = _read_json(path)
    elif suffix == ".parquet":
        import pyarrow.parquet as pq

        rows = pq.read_table(path).to_pylist()
    else:
        raise DataFileError(f"{path}: unsupported data file type {suffix!r}; use one of {SUFFIXES}")
    if not rows:
        raise DataFileError(f"{path}: data file holds no rows")
    return rows


def read_json_text(path: Path) -> str:
    """The text of a JSON or JSONL file in the encodings JSON allows: UTF-8 (with or without a
    byte-order mark), UTF-16 or UTF-32 (as spreadsheet tools export them), recognised as
    `json.loads` recognises them; anything else is refused in one line naming the first byte
    that is not UTF-8."""
    raw = path.read_bytes()
    codec = json.detect_encoding(raw)
    try:
        return raw.decode(codec)
    except UnicodeDecodeError as error:
        raise DataFileError(
            f"{path}: not UTF-8, UTF-16 or UTF-32 text (byte {raw[error.start]:#04x} at offset "
            f"{error.start} is not {codec}); save the file as UTF-8"
        ) from None


def _read_jsonl(path: Path) -> list[dict[str, Any]]:
    rows = []
    with io.StringIO(read_json_text(path), newline=None) as handle:  # \n, \r\n or \r
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as error:
                raise DataFileError(f"{path}:{number}: malformed JSON line ({error.msg})") from None
            if not isinstance(row, dict):
                raise DataFileError(
                    f"{path}:{number}: expected a JSON object, got {type(row).__name__}"
                )
            row["_line"] = number
            rows.append(row)
    return rows


def _read_json(path: Path) -> list[dict[str, Any]]:
    text = read_json_text(path)
    if not text.strip():
        return []
    try:
        data = json.loads(text)
    except json.JSONDecodeError as error:
        raise DataFileError(f"{path}:{error.lineno}: malformed JSON ({error.msg})") from None
    if isinstance(data, dict) and isinstance(data.get("data"), list):
        data = data["data"]
    if not isinstance(data, list) or not all(isinstance(row, dict) for row in data):
        raise DataFileError(f'{path}: expected a list of JSON objects (or {{"data": [...]}})')
    return data


def require_fields(rows: Iterable[dict[str, Any]], fields: Iterable[str], source: str) -> None:
    """Fail on the first row that lacks a required field, naming the source and row."""
    fields = list(fields)
    for index, row in enumerate(rows):
        missing = [name for name in fields if row.get(name) in (None, "")]
        if missing:
            where = f"line {row['_line']}" if "_line" in row else f"row {index}"
            raise DataFileError(f"{source}: {where}: missing field(s) {missing}; required {fields}")


def jsonl_line(row: dict[str, Any]) -> str:
    """One row as a JSONL line, without the readers' bookkeeping keys."""
    clean = {key: value for key, value in row.items() if key not in PRIVATE}
    return json.dumps(clean, ensure_ascii=False, default=str) + "\n"
