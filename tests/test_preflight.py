"""`python -m src.preflight`: the starting policy's samples read as the room, on the tiny model
and the arithmetic task, printed, logged to MLflow and written to preflight.json; bad room
settings refused in one line before any model loads."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from src.preflight import preflight
from src.utils.errors import ConfigError
from tests.helpers.command import command
from tests.helpers.mlflow_runs import only_run

SMALL = ["room.rows=4", "room.k=4", "room.batch_size=2", "data.val_size=8"]
KNOWN = [*SMALL, "rollout._target_=tests.helpers.known_answers.KnownAnswers"]


def test_the_preflight_reads_known_answers_as_the_room(make_cfg, capsys) -> None:
    cfg = make_cfg(*KNOWN)
    figures = preflight(cfg)
    assert set(figures) == {"train", "validation"}  # no data.unseen: no unseen split
    for split in figures.values():  # 3 of 4 samples state the sum
        assert split["prompts"] == 4 and split["k"] == 4
        assert split["pass_at_1"] == pytest.approx(0.75)
        assert split["maj_at_k"] == 1.0 and split["pass_at_k"] == 1.0
        assert split["room"] == pytest.approx(0.25)
        assert split["learnability"] == pytest.approx(0.75 * 0.25)
        assert split["signal"] == 1.0
    printed = capsys.readouterr().out
    assert "pre-flight: 4 samples a prompt" in printed
    assert (
        "verdict (validation): signal in 100% of groups, room 0.25 +-0.00 on validation" in printed
    )
    saved = json.loads((Path(cfg.paths.run_dir) / "preflight.json").read_text())
    assert saved["figures"]["train"]["pass_at_1"] == pytest.approx(0.75)
    run = only_run(cfg)
    assert run.data.tags["stage"] == "preflight"
    assert run.data.metrics["preflight/validation/maj_at_k"] == 1.0
    assert run.data.tags["preflight.validation"].startswith("signal in 100%")


def test_the_preflight_samples_the_tiny_model(make_cfg) -> None:
    figures = preflight(make_cfg(*SMALL))
    validation = figures["validation"]
    assert 0.0 <= validation["pass_at_1"] <= validation["pass_at_k"] <= 1.0
    assert validation["truncated"] + validation["distinct"] > 0  # an untrained model rambles


def test_the_preflight_trains_a_tasks_stages_then_samples_the_policy_they_make(make_cfg) -> None:
    """task=char_diffusion: its generator and judge stages train first (cached), then the
    generator's fill-ins are sampled and read as a graded room on the judge's score."""
    from tests.helpers.char_diffusion import SMALL as CHAR_DIFFUSION

    figures = preflight(make_cfg(*CHAR_DIFFUSION, "room.rows=4", tiny=False))
    assert set(figures) == {"train", "validation"}
    for split in figures.values():
        assert split["prompts"] == 4 and split["k"] == 2
        assert split["best_of_k"] >= split["pass_at_1"] == pytest.approx(split["judge/mean"])
        assert "maj_at_k" not in split  # graded: no vote


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("room.success=no_such", "room.success=no_such names no function of this run's reward"),
        ("room.form=no_such", "room.form=no_such names no function of this run's reward"),
        ("room.splits=[train,test]", "room.splits names ['test']: choose among"),
        ("room.k=0", "room.k"),
    ],
)
def test_bad_room_settings_are_one_line(make_cfg, override: str, message: str) -> None:
    cfg = make_cfg(override)
    args = [f"{key}={value}" for key, value in [("paths.output_root", cfg.paths.output_root)]]
    result = command("src.preflight", "model=tiny", "sft.enabled=false", *args, override)
    assert result.returncode == 1
    assert message in result.stderr and "Traceback" not in result.stderr


def test_room_settings_are_checked_as_the_preflight_reads_them(make_cfg) -> None:
    with pytest.raises(ConfigError, match="room.success=no_such names no function"):
        preflight(make_cfg(*SMALL, "room.success=no_such"))


def test_the_room_table_script_reads_a_preflight(make_cfg, monkeypatch, capsys) -> None:
    from scripts import room_table

    cfg = make_cfg(*KNOWN)
    preflight(cfg)
    capsys.readouterr()
    path = Path(cfg.paths.run_dir) / "preflight.json"
    monkeypatch.setattr("sys.argv", ["room_table.py", str(path)])
    room_table.main()
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("| run | seconds | split | N | k | pass@1 | maj@k |")
    rows = [line for line in lines[2:] if line.startswith("|")]
    assert len(rows) == 2 and "| validation | 4 | 4 | 0.750 +-0.000 | 1.000 |" in rows[1]


def test_the_room_table_script_refuses_a_file_it_cannot_read_in_one_line(
    tmp_path, monkeypatch, capsys
) -> None:
    from scripts import room_table

    (tmp_path / "text.json").write_text("not json")
    (tmp_path / "other.json").write_text('{"rows": 3}')
    for name, said in (
        ("missing.json", "no such file"),
        ("text.json", "not JSON"),
        ("other.json", "holds no pre-flight figures"),
    ):
        monkeypatch.setattr("sys.argv", ["room_table.py", str(tmp_path / name)])
        with pytest.raises(SystemExit) as ended:
            room_table.main()
        assert ended.value.code == 2
        out, err = capsys.readouterr()
        assert out == "" and said in err and "python -m src.preflight" in err
        assert "Traceback" not in err
