"""Plans are stored per model, template and question, and read as JSON when they are JSON."""

from src.policy.plans import PlanCache, read_plan


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
    assert read_plan('{"topic": "unclosed') == ('{"topic": "unclosed', False)
    assert read_plan("[1, 2]") == ("[1, 2]", False)
