"""The reader role: passages retrieved once per row, written into the prompt, kept as details."""

import pytest

from src.policy.reader import Reader
from src.retrieval.corpus import Document
from src.retrieval.hit import Hit
from src.utils.errors import ConfigError


class CountingRetriever:
    def __init__(self) -> None:
        self.asked: list[str] = []

    def search(self, queries: list[str], k: int) -> list[list[Hit]]:
        self.asked += queries
        return [
            [Hit(Document(f"{q}-{i}", f"T{i}", f"about {q}"), 1.0 / (i + 1)) for i in range(k)]
            for q in queries
        ]


def test_passages_are_retrieved_once_and_fill_the_prompt():
    retriever = CountingRetriever()
    role = Reader(retriever, k=2, template="{passages}\nQ: {question}")
    rows = [{"question": "anthrax?", "answer_text": "B"}, {"question": "cholera?"}]
    assert "timing/retrieval" in role.prepare(None, rows)
    assert role.prepare(None, rows) == {}  # already prepared: nothing retrieved again
    assert retriever.asked == ["anthrax?", "cholera?"]
    assert role.prompts(rows) == [
        "[1] T0: about anthrax?\n[2] T1: about anthrax?\nQ: anthrax?",
        "[1] T0: about cholera?\n[2] T1: about cholera?\nQ: cholera?",
    ]
    outcomes = role.outcomes([" Bacillus", " Vibrio"], rows)
    assert outcomes.texts == [" Bacillus", " Vibrio"]
    assert outcomes.details[0] == {"passages": ["anthrax?-0", "anthrax?-1"]}


def test_a_query_field_the_rows_lack_is_named():
    role = Reader(CountingRetriever(), query_field="context")
    with pytest.raises(ConfigError, match="policy.query_field='context'"):
        role.prepare(None, [{"question": "q"}])
