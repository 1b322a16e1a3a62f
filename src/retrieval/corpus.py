"""A retrieval corpus: documents read from a JSONL file or a folder of text files, checked."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from src.data.files import DataFileError, read_rows
from src.utils.errors import ConfigError, MissingFileError

KEY = "retrieval.corpus"
SAMPLE_CORPUS = Path(__file__).resolve().parent / "samples" / "medical_textbook.jsonl"
TEXT_SUFFIXES = (".txt", ".md")
ROW_SUFFIXES = (".jsonl", ".json", ".parquet")
HINT = (
    f"point {KEY} at a JSONL file of id/title/content rows or a folder of .txt/.md files, "
    "or set it to null for the shipped sample"
)


@dataclass(frozen=True)
class Document:
    """One retrievable passage; `id` is unique within its corpus and names it in results."""

    id: str
    title: str
    content: str

    @property
    def text(self) -> str:
        """Title and content as one string, the way the indexes read a document."""
        return f"{self.title} {self.content}" if self.title else self.content


def load_corpus(path: str | Path) -> list[Document]:
    """The documents of a JSONL (or JSON/Parquet) file of `id`/`title`/`content` rows, or of a
    folder of .txt/.md files, so that a run fails on a bad corpus before any model loads.

    In a file, `content` is required, `id` defaults to the line (row) number and `title` to "".
    In a folder (searched recursively, sorted), a document's id is its path relative to the
    folder, its title the first non-empty line (without Markdown `#`s) and its content the rest,
    or the whole text when nothing follows; blank files are skipped.
    """
    path = Path(path)
    if path.is_dir():
        documents = _from_folder(path)
    elif path.is_file():
        documents = _from_file(path)
    else:
        raise MissingFileError(f"{KEY}: no file or folder at {path}; {HINT}")
    if not documents:
        what = f"no {'/'.join(TEXT_SUFFIXES)} file with text" if path.is_dir() else "no rows"
        raise ConfigError(f"{KEY}: {path} holds no documents ({what}); {HINT}")
    seen: dict[str, int] = {}
    for index, document in enumerate(documents):
        if document.id in seen:
            raise DataFileError(
                f"{path}: duplicate document id {document.id!r} (documents {seen[document.id] + 1} "
                f"and {index + 1}); every id must be unique"
            )
        seen[document.id] = index
    return documents


def corpus_fingerprint(documents: list[Document]) -> str:
    """sha256 hex digest of every document's id, title and content in order, so that an index
    cached for a corpus is reused only for exactly that corpus."""
    digest = hashlib.sha256()
    for document in documents:
        line = json.dumps([document.id, document.title, document.content], ensure_ascii=False)
        digest.update(line.encode("utf-8") + b"\n")
    return digest.hexdigest()


def _from_file(path: Path) -> list[Document]:
    if path.suffix.lower() not in ROW_SUFFIXES:
        raise DataFileError(
            f"{path}: unsupported corpus file type {path.suffix!r}; use .jsonl (or .json, "
            f".parquet) rows, or a folder of {'/'.join(TEXT_SUFFIXES)} files"
        )
    if path.suffix.lower() != ".parquet" and _blank(path):
        return []
    return [_document(row, path, number) for number, row in enumerate(read_rows(path), start=1)]


def _blank(path: Path) -> bool:
    """True when a text file holds nothing but whitespace (read only up to its first text)."""
    with path.open(encoding="utf-8", errors="replace") as handle:
        return not any(line.strip() for line in handle)


def _document(row: dict[str, Any], path: Path, number: int) -> Document:
    line = row.get("_line", number)
    where = f"{path}:{line}" if "_line" in row else f"{path}: row {number}"
    content = row.get("content")
    if content is None or (isinstance(content, str) and not content.strip()):
        raise DataFileError(f"{where}: missing field 'content'; rows need id, title and content")
    title = row.get("title")
    title = "" if title is None else title
    for field, value in (("content", content), ("title", title)):
        if not isinstance(value, str):
            raise DataFileError(
                f"{where}: field {field!r} must be a string, got {type(value).__name__}"
            )
    identifier = row.get("id")
    if identifier is None:
        identifier = str(line)
    elif isinstance(identifier, int) and not isinstance(identifier, bool):
        identifier = str(identifier)
    elif not isinstance(identifier, str) or not identifier:
        raise DataFileError(
            f"{where}: field 'id' must be a non-empty string (or an integer), got {identifier!r}"
        )
    return Document(id=identifier, title=title.strip(), content=content.strip())


def _from_folder(folder: Path) -> list[Document]:
    documents = []
    files = sorted(
        file
        for file in folder.rglob("*")
        if file.is_file() and file.suffix.lower() in TEXT_SUFFIXES
    )
    for file in files:
        text = file.read_text(encoding="utf-8", errors="replace").strip()
        if not text:
            continue
        first, _, rest = text.partition("\n")
        title = first.strip().lstrip("#").strip() if file.suffix.lower() == ".md" else first.strip()
        content = rest.strip() or text
        documents.append(
            Document(id=file.relative_to(folder).as_posix(), title=title, content=content)
        )
    return documents
