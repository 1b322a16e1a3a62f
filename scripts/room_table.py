"""The pre-flights' figures as a markdown table, one row per run and split (docs/room.md).

    python -m src.preflight task=medmcqa                # writes RUN_FOLDER/preflight.json
    python scripts/room_table.py outputs/runs/medmcqa/*/preflight.json

Each row: the file's task and model (from the run's .hydra/config.yaml beside it), the split,
N prompts, k samples, pass@1, maj@k (or best-of-k for a graded reward), pass@k, the room,
well-formed, right among well-formed, form and answer rooms, signal, learnability, truncated
and distinct shares; the seconds the whole pre-flight took. pass@1 and the room carry their
95 % margin over the prompts (`+-`) where the file has it.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import yaml

COLUMNS = (  # (figure, heading)
    ("prompts", "N"),
    ("k", "k"),
    ("pass_at_1", "pass@1"),
    ("maj_at_k", "maj@k"),
    ("best_of_k", "best-of-k"),
    ("pass_at_k", "pass@k"),
    ("room", "room"),
    ("well_formed", "well-formed"),
    ("right_among_well_formed", "right among w-f"),
    ("form_room", "form room"),
    ("answer_room", "answer room"),
    ("signal", "signal"),
    ("learnability", "p(1-p)"),
    ("truncated", "truncated"),
    ("distinct", "distinct"),
)


def described(path: Path) -> str:
    """`task, model (dtype)` of the run that wrote `path`, from its Hydra folder."""
    config, hydra = (path.parent / ".hydra" / name for name in ("config.yaml", "hydra.yaml"))
    if not config.is_file() or not hydra.is_file():
        return path.parent.name
    cfg = yaml.safe_load(config.read_text())
    model = yaml.safe_load(hydra.read_text())["hydra"]["runtime"]["choices"].get("model", "?")
    return f"{cfg.get('task_name')}, {model} ({cfg['model'].get('dtype', 'float32')})"


def cell(figures: dict[str, float], name: str) -> str:
    """One figure, with its 95 % margin over the prompts where the file has one."""
    value = figures.get(name)
    if value is None or (name == "best_of_k" and "maj_at_k" in figures):
        return ""
    if name in ("prompts", "k"):
        return f"{int(value)}"
    spread = figures.get(f"{name}_margin")
    return f"{value:.3f} +-{spread:.3f}" if spread is not None else f"{value:.3f}"


def read(path: Path) -> dict[str, Any]:
    """The figures a pre-flight saved in `path`; `ValueError` in one line naming the file and
    what to give where it is missing, not JSON or holds no figures."""
    give = "give preflight.json files written by python -m src.preflight"
    if not path.is_file():
        raise ValueError(f"{path}: no such file; {give}")
    try:
        saved = json.loads(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise ValueError(f"{path}: not JSON ({error}); {give}") from None
    if not isinstance(saved, dict) or not isinstance(saved.get("figures"), dict):
        raise ValueError(f"{path}: holds no pre-flight figures; {give}")
    return saved


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").strip().splitlines()[0])
    parser.add_argument("files", nargs="+", type=Path, help="preflight.json files")
    args = parser.parse_args()
    try:
        files = [(path, read(path)) for path in args.files]  # all read before any line prints
    except ValueError as error:
        parser.error(str(error))
    print("| run | seconds | split | " + " | ".join(heading for _, heading in COLUMNS) + " |")
    print("|---|---|---|" + "---|" * len(COLUMNS))
    for path, saved in files:
        seconds = f"{saved['seconds']:.0f}" if "seconds" in saved else ""
        for split, figures in saved["figures"].items():
            cells = " | ".join(cell(figures, name) for name, _ in COLUMNS)
            print(f"| {described(path)} | {seconds} | {split} | {cells} |")


if __name__ == "__main__":
    main()
