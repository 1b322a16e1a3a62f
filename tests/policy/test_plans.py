"""Plans are stored per model, template and question, and read as JSON when they are JSON."""

import json

import pytest

from src.policy.plans import PlanCache, closed_object, read_plan


def test_plans_are_kept_per_model_and_template(tmp_path):
    cache = PlanCache(tmp_path, "model-a", "template {question}")
    cache.add({"Q1?": '{"topic": "x"}', "Q2?": "plain"})
    again = PlanCache(tmp_path, "model-a", "template {question}")
    assert again.get("Q1?") == '{"topic": "x"}' and again.get("Q2?") == "plain"
    assert PlanCache(tmp_path, "model-b", "template {question}").get("Q1?") is None
    assert PlanCache(tmp_path, "model-a", "other {question}").get("Q1?") is None


def test_a_line_cut_short_is_planned_again(tmp_path):
    cache = PlanCache(tmp_path, "m", "t")
    cache.add({"Q1?": "one"})
    with cache.path.open("a") as file:
        file.write('{"question": "abc", "pla')  # a run stopped mid-write
    assert PlanCache(tmp_path, "m", "t").get("Q1?") == "one"


def test_read_plan():
    assert read_plan('Sure! {"topic": "anthrax", "facts_needed": ["cause"]} done') == (
        '{"topic": "anthrax", "facts_needed": ["cause"]}',
        True,
    )
    assert read_plan("first find the\n organism") == ("first find the organism", False)
    assert read_plan('{"topic": "unclosed') == ('{"topic": "unclosed"}', True)
    assert read_plan("[1, 2]") == ("[1, 2]", False)


@pytest.mark.parametrize(
    ("text", "read"),
    [
        ('{"topic": "anthrax", "facts_needed": ["cause", "trea', {"topic": "anthrax", "facts_needed": ["cause", "trea"]}),
        ('{"topic": "anthrax", "facts_needed":', {"topic": "anthrax"}),
        ('{"topic": "anthrax", "facts', {"topic": "anthrax"}),
        ('{"topic": "a \\"quoted\\" wo', {"topic": 'a "quoted" wo'}),
        ('{"topic": "anthrax"]\n{"answer": "B"}', {"topic": "anthrax"}),
        ('{"topic": {"organ": "skin", "cause": "spo', {"topic": {"organ": "skin", "cause": "spo"}}),
    ],
)  # fmt: skip
def test_an_object_cut_short_is_closed(text, read):
    assert closed_object(text) == read
    assert read_plan(text) == (json.dumps(read, ensure_ascii=False), True)


def test_what_cannot_be_closed_is_text():
    assert closed_object('{"topic"') is None
    assert closed_object("{") is None
    assert read_plan('{"topic"') == ('{"topic"', False)
