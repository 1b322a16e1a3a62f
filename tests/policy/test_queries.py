"""A rewriter's completion is read into queries whatever its shape, and never raises."""

import pytest

from src.policy.queries import parse_queries


@pytest.mark.parametrize(
    "text",
    [
        "1. anthrax organism\n2. anthrax cause\n3. bacillus spores",
        " anthrax organism\n2) anthrax cause\n3) bacillus spores",
        "- anthrax organism\n* anthrax cause\n\u2022 bacillus spores",
        '["anthrax organism", "anthrax cause", "bacillus spores"]',
        'Queries: {"queries": ["anthrax organism", "anthrax cause", "bacillus spores"]}',
        "Query 1: anthrax organism\nQuery 2: anthrax cause\nQuery 3: bacillus spores",
        "[1] anthrax organism\n[2] anthrax cause\n[3] bacillus spores",
        "anthrax organism\n\nanthrax cause\nbacillus spores\nfourth query is dropped",
    ],
)
def test_every_shape_gives_the_three_queries(text):
    assert parse_queries(text, 3) == ["anthrax organism", "anthrax cause", "bacillus spores"]


def test_duplicates_short_lines_and_the_limit():
    assert parse_queries("1. Anthrax\n2. anthrax\n3. ..\n4. b\n5. cholera", 2) == [
        "Anthrax",
        "cholera",
    ]


@pytest.mark.parametrize("text", ["", "   \n\n", "1.\n2.\n3.", '{"queries": []}', "[1, 2]"])
def test_nothing_readable_gives_no_queries(text):
    assert parse_queries(text) == []


def test_broken_json_falls_back_to_lines():
    assert parse_queries('["anthrax organism", "anthrax cau') == ['anthrax organism", "anthrax cau']


def test_long_queries_are_cut():
    assert parse_queries("x" * 500, max_chars=50) == ["x" * 50]
