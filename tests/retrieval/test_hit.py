"""merge_hits: one hit per document, by best rank across the lists, then by score; holds."""

from __future__ import annotations

from src.retrieval.corpus import Document
from src.retrieval.hit import Hit, holds, merge_hits


def hit(id: str, score: float) -> Hit:
    return Hit(Document(id, id.upper(), f"text of {id}"), score)


def ids(hits: list[Hit]) -> list[str]:
    return [h.document.id for h in hits]


def test_rank_zero_of_every_list_comes_before_any_rank_one():
    first = [hit("a", 9.0), hit("b", 8.0), hit("c", 7.0)]
    second = [hit("d", 2.0), hit("e", 1.5)]
    assert ids(merge_hits([first, second], k=10)) == ["a", "d", "b", "e", "c"]


def test_a_document_in_several_lists_appears_once_at_its_best_rank_and_score():
    first = [hit("a", 5.0), hit("b", 4.0)]
    second = [hit("b", 6.0), hit("c", 1.0)]
    merged = merge_hits([first, second], k=10)
    # b is rank 0 in the second list with the higher score 6.0, so it leads; a is also rank 0.
    assert ids(merged) == ["b", "a", "c"]
    assert [h.score for h in merged] == [6.0, 5.0, 1.0]


def test_ties_in_rank_and_score_keep_the_order_of_the_lists():
    assert ids(merge_hits([[hit("x", 1.0)], [hit("y", 1.0)], [hit("z", 1.0)]], k=3)) == [
        "x",
        "y",
        "z",
    ]


def test_at_most_k_and_empty_lists():
    lists = [[hit("a", 3.0), hit("b", 2.0)], [], [hit("c", 1.0)]]
    assert ids(merge_hits(lists, k=2)) == ["a", "c"]
    assert merge_hits([], k=3) == [] and merge_hits([[], []], k=3) == []
    assert merge_hits(lists, k=0) == []


def test_a_gold_text_is_held_by_the_content_or_with_it_the_title():
    hit = Hit(Document("d1", "Heart Failure", "Presents with swollen ankles."), 1.0)
    assert holds(hit, "swollen ankles")
    assert holds(hit, "heart failure")  # the title, read as `title: content`
    assert holds(hit, "failure: presents")  # across the two, as the reader reads them
    assert not holds(hit, "heart failure", with_title=False)
    assert not holds(hit, "gout")
