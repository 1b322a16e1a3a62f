"""`benchmarks/vs_trl.py`'s arguments: a wrong name is answered with the ones allowed."""

from __future__ import annotations

import sys

import pytest

from src.utils.resolvers import PROJECT_ROOT

sys.path.insert(0, str(PROJECT_ROOT / "benchmarks"))
from vs_trl import parse_args  # noqa: E402
from vs_trl_common import SHAPES  # noqa: E402


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (
            ["--configs", "b,z"],
            f"--configs: unknown ['z']; choose among {', '.join(sorted(SHAPES))}",
        ),
        (["--frameworks", "ours,verl"], "--frameworks: unknown ['verl']; choose among ours, trl"),
    ],
)
def test_an_unknown_name_is_answered_with_the_allowed_ones(argv, message, capsys) -> None:
    with pytest.raises(SystemExit):
        parse_args(argv)
    assert capsys.readouterr().err.strip().splitlines()[-1].endswith(message)


def test_the_help_lists_every_configuration(capsys) -> None:
    with pytest.raises(SystemExit):
        parse_args(["--help"])
    assert f"any of {','.join(sorted(SHAPES))}" in " ".join(capsys.readouterr().out.split())
