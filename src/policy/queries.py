"""Search queries read out of a rewriter's completion, whatever shape it wrote them in.

Accepted shapes: a JSON list of strings, a JSON object holding such a list (under any key, e.g.
"queries"), numbered lines ("1. ...", "2) ...", "[3] ..."), bullets ("- ...", "* ..."), or
plain lines.
What cannot be read is dropped, so a malformed completion gives the queries that could be read,
or none; parsing never raises.
"""

from __future__ import annotations

import json
import re
from typing import Any

MARKER = re.compile(r"^\s*(?:(?:query\s*)?\d+\s*[.):-]|\[\d+\]|[-*\u2022])\s*", re.IGNORECASE)
LABEL = re.compile(r"^\s*(?:search\s+)?quer(?:y|ies)\s*\d*\s*:\s*", re.IGNORECASE)
MIN_CHARS = 3  # shorter lines are punctuation or stray markers, not queries


def parse_queries(text: str, limit: int = 3, max_chars: int = 200) -> list[str]:
    """At most `limit` distinct queries from `text`, in the order written, each cut to
    `max_chars`; [] when nothing readable is there."""
    found = _from_json(text)
    if found is None:
        found = _from_lines(text)
    queries: list[str] = []
    seen: set[str] = set()
    for query in found:
        query = " ".join(query.split())[:max_chars].strip(" \"'`,;[]{}")
        if len(query) >= MIN_CHARS and query.lower() not in seen:
            seen.add(query.lower())
            queries.append(query)
        if len(queries) == limit:
            break
    return queries


def _from_json(text: str) -> list[str] | None:
    """The strings of the first JSON list in `text` (alone or inside an object), or None."""
    start = min((i for i in (text.find("["), text.find("{")) if i >= 0), default=-1)
    if start < 0:
        return None
    try:
        value, end = json.JSONDecoder().raw_decode(text[start:])
    except json.JSONDecodeError:
        return None
    if text[start + end :].strip():
        return None  # JSON-looking text followed by more, e.g. "[1] first query"
    return _strings(value) or []


def _strings(value: Any) -> list[str] | None:
    if isinstance(value, list):
        strings = [item for item in value if isinstance(item, str)]
        return strings or None
    if isinstance(value, dict):
        for item in value.values():
            strings = _strings(item)
            if strings:
                return strings
    return None


def _from_lines(text: str) -> list[str]:
    """One query per non-empty line, numbering, bullets and a 'Query:' label removed."""
    queries = []
    for line in text.splitlines():
        line = LABEL.sub("", MARKER.sub("", line, count=1), count=1)
        if line.strip():
            queries.append(line)
    return queries
