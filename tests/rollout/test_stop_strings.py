"""`rollout.stop_strings`: declared once (a list of non-empty texts), a line end typed on the
command line means a line end, and the multi-turn rollout ends a row at a stop text as the
single-turn sampler does."""

from __future__ import annotations

import pytest

from src.rollout.multi_turn import MultiTurnSampler
from src.rollout.stops import stop_texts
from src.runs.settings import check_settings
from src.utils.config import build
from src.utils.errors import UserError
from tests.helpers.scripted_turns import ScriptedTurns


def test_a_line_end_typed_as_two_characters_is_a_line_end():
    assert stop_texts(["\\n", "END", "\\n\\n", "a\\tb"]) == ["\n", "END", "\n\n", "a\tb"]
    assert stop_texts(["\n"]) == ["\n"]  # a YAML file's "\n" is one already
    assert stop_texts(None) == []


def test_a_doubled_backslash_is_one_backslash_read_from_the_left():
    """`"\\\\t"` on the command line is a backslash and a t, as in a YAML file, not a
    backslash and a tab; `\\\\n` likewise; a lone backslash elsewhere stays."""
    assert stop_texts(["\\\\t", "\\\\n", "\\\\", "a\\b"]) == ["\\t", "\\n", "\\", "a\\b"]
    assert stop_texts(["\\\\\\t"]) == ["\\\t"]  # a backslash, then a tab


def test_the_command_lines_line_end_reaches_the_sampler_as_one(make_cfg):
    cfg = make_cfg('rollout.stop_strings=["\\n"]')  # what `'...=["\n"]'` in a shell passes
    assert list(cfg.rollout.stop_strings) == ["\\n"]  # Hydra keeps the two characters
    check_settings(cfg)
    assert build(cfg.rollout).stop_strings == ["\n"]


@pytest.mark.parametrize(
    ("override", "value"),
    [
        ("rollout.stop_strings=END", "'END'"),  # a bare text is refused, never split in letters
        ("rollout.stop_strings=['']", "['']"),  # an empty stop would end every row at once
        ("rollout.stop_strings=[END,'']", "['END', '']"),
        ("rollout.stop_strings=[1]", "[1]"),
    ],
)
def test_a_stop_that_is_not_a_list_of_texts_is_one_line(make_cfg, override, value):
    cfg = make_cfg(override)
    with pytest.raises(UserError) as caught:
        check_settings(cfg)
    message = str(caught.value)
    assert "\n" not in message
    assert message.startswith("rollout.stop_strings must be a list of non-empty texts")
    assert message.endswith(f"got {value}")


def test_the_multi_turn_rollout_ends_a_row_at_a_stop_text(tiny_lm):
    def script(context: str, row: int) -> str:
        return [" terms END more$", " <search>x</search>"][row % 2]

    tool = lambda queries, prompts: ["\n<information>about</information>\n"] * len(queries)  # noqa: E731
    turns = ScriptedTurns(script, max_completion_length=40, stop_strings=["END"])
    rollout = MultiTurnSampler(turns, tool, max_searches=0).sample(tiny_lm, ["Q?"], 2)
    assert rollout.completions[0] == " terms END"  # ended at the stop, " more" never kept
    assert not rollout.is_clipped[0]
    without = ScriptedTurns(script, max_completion_length=40)
    plain = MultiTurnSampler(without, tool, max_searches=0).sample(tiny_lm, ["Q?"], 2)
    assert plain.completions[0] == " terms END more"
