"""A completion's queries as a lexical search sees them, computed by hand on small cases."""

from __future__ import annotations

import pytest

from src.policy.query_terms import query_shape, query_terms


def test_terms_are_the_searched_words_with_repeats():
    assert query_terms("The serum marker, serum MARKER of a tumor") == [
        "serum",
        "marker",
        "serum",
        "marker",
        "tumor",
    ]


def test_a_padded_query_by_hand():
    # 6 terms: serum marker serum marker serum marker -> 2 distinct, 4 repeats
    shape = query_shape(["serum marker, serum marker, serum marker"])
    assert shape == {
        "repeats_term": True,
        "query_terms": 6.0,
        "query_distinct_terms": 2.0,
        "repeated_term_share": pytest.approx(4 / 6),
    }


def test_two_queries_average_per_query_and_repeats_count_within_a_query():
    # "hepatomegaly jaundice" (2 terms) and "jaundice vomiting vomiting" (3 terms, 2 distinct):
    # a term shared by two queries is no repeat; one within the second is
    shape = query_shape(["hepatomegaly, jaundice", "jaundice vomiting vomiting"])
    assert shape["repeats_term"] is True
    assert shape["query_terms"] == 2.5
    assert shape["query_distinct_terms"] == 2.0
    assert shape["repeated_term_share"] == pytest.approx(1 / 5)


def test_distinct_terms_repeat_nothing_and_no_query_is_all_zero():
    assert query_shape(["tachycardia, weight loss"])["repeats_term"] is False
    assert query_shape(["tachycardia, weight loss"])["repeated_term_share"] == 0.0
    assert query_shape([]) == {
        "repeats_term": False,
        "query_terms": 0.0,
        "query_distinct_terms": 0.0,
        "repeated_term_share": 0.0,
    }
