"""The evaluation summary printed at the end of `python -m src.eval`."""

from src.eval import summary_table


def test_every_column_name_is_printed_whole_and_the_columns_line_up():
    summaries = {
        "question": {"eval/accuracy": 0.775, "eval/role/gold_retrieved": 0.875},
        "base": {"eval/accuracy": 0.5, "eval/role/completion_tokens": 41.25},
    }
    header, *rows = summary_table(summaries).splitlines()
    for name in ("eval/role/gold_retrieved", "eval/role/completion_tokens", "eval/accuracy"):
        assert f" {name}" in header
    assert rows[0].split() == ["question", "0.775", "0.875", "nan"]
    assert rows[1].split() == ["base", "0.500", "nan", "41.250"]
    ends = {len(line) for line in (header, *rows)}
    assert len(ends) == 1  # every line as wide: the columns line up
    assert header.index("eval/accuracy") + len("eval/accuracy") == rows[0].index("0.775") + 5
