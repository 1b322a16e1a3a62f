"""What GRPO has to work with: from a run's samples tables (`algo.samples_every_n_steps`), the
share of groups in which some completion puts the gold passage on top, the mean share of
completions that do, and the share of groups whose completions' gold ranks differ at all. A
group whose completions all score alike teaches nothing; a skill that no completion of a group
shows cannot be reinforced.

    python -m src.train task=medqa_rewriter algo.optimizer.lr=1e-12 algo.group_size=16 \\
        algo.samples_every_n_steps=1 trainer.max_steps=8 data.val_size=4 data.max_val_rows=4
    python scripts/group_room.py RUN_ID          # the run's MLflow id

(`lr` 1e-12: the base policy's groups, nothing learned.) Reads
`outputs/mlartifacts/RUN_ID/artifacts/samples/step_*.json`; prints the figures and, for a few
groups, a completion that puts the gold passage on top beside one that does not.
"""

from __future__ import annotations

import argparse
import importlib
import json
import re
import sys
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCRIPTS = {  # --findings: the script that wrote the rows, whose tables say each answer's findings
    "sample": "make_findings_sample",
    "unseen": "make_findings_unseen",
    "check": "make_findings_check",
}


def groups(run: str, artifacts: Path) -> list[list[dict]]:
    """Each sampled group of the run's samples tables: the completions of one prompt at one step."""
    if not (artifacts / run).is_dir():
        raise SystemExit(
            f"group_room: no run {run} in {artifacts}; give a run's MLflow id (a folder name "
            "there), or --artifacts with the folder that holds it"
        )
    tables = sorted((artifacts / run / "artifacts" / "samples").glob("step_*.json"))
    if not tables:
        raise SystemExit(
            f"group_room: no samples tables under {artifacts / run}; "
            "run with algo.samples_every_n_steps=1"
        )
    found: dict[tuple[str, str], list[dict]] = defaultdict(list)
    for table in tables:
        data = json.loads(table.read_text())
        if RANK not in data["columns"]:
            raise SystemExit(
                f"group_room: {table} has no {RANK} column (its columns: "
                f"{', '.join(data['columns'])}); give a run of a task that searches with "
                "reward=gold_rank, such as task=medqa_rewriter"
            )
        for values in data["data"]:
            row = dict(zip(data["columns"], values, strict=True))
            found[(table.name, str(row["prompt"]))].append(row)
    return list(found.values())


RANK = "gold_reciprocal_rank"  # the samples tables' column of the gold passage's 1/rank


def room(found: list[list[dict]]) -> dict[str, float]:
    """The shares described above, over the groups."""
    on_top = [[row["gold_reciprocal_rank"] == 1.0 for row in group] for group in found]
    ranks = [{row["gold_reciprocal_rank"] for row in group} for group in found]
    return {
        "groups": float(len(found)),
        "some completion on top": sum(any(top) for top in on_top) / len(found),
        "completions on top": sum(sum(top) / len(top) for top in on_top) / len(found),
        "groups whose ranks differ": sum(len(r) > 1 for r in ranks) / len(found),
    }


def words(text: str) -> str:
    """Lower-cased words joined by single spaces, with a space at each end."""
    return " " + " ".join(re.findall(r"[a-z0-9]+", text.lower())) + " "


def names_findings(found: list[list[dict]], script: str) -> float:
    """The share of completions naming a finding of their row's gold answer in the textbook's
    words that their question does not already name (the skill the rewriter exists for), read
    from the tables of the script that wrote the rows."""
    sys.path.insert(0, str(ROOT / "scripts"))
    module = importlib.import_module(SCRIPTS[script])
    rows = [json.loads(line) for line in module.SAMPLE.open()]
    findings = {answer: f for kind in module.ANSWERS.values() for answer, f in kind.items()}
    named, total = 0, 0
    for group in found:
        prompt = str(group[0]["prompt"])
        row = next((r for r in rows if r["question"] in prompt), None)
        if row is None:
            raise SystemExit(f"group_room: a prompt matches no question of {module.SAMPLE}")
        new = [f for f in findings[row["answer"]] if words(f) not in words(row["question"])]
        for completion in group:
            named += any(words(f) in words(str(completion["completion"])) for f in new)
            total += 1
    return named / total


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").strip().splitlines()[0])
    parser.add_argument("run", help="the run's MLflow id")
    parser.add_argument("--artifacts", type=Path, default=ROOT / "outputs" / "mlartifacts")
    parser.add_argument("--examples", type=int, default=4, help="groups to show")
    parser.add_argument(
        "--findings", choices=sorted(SCRIPTS), help="the rows' set: also the share naming findings"
    )
    args = parser.parse_args()
    found = groups(args.run, args.artifacts)
    figures = room(found)
    if args.findings:
        figures["completions naming a finding"] = names_findings(found, args.findings)
    print(", ".join(f"{name} {value:.3f}" for name, value in figures.items()))
    mixed = [
        group for group in found if len({row["gold_reciprocal_rank"] == 1.0 for row in group}) == 2
    ]
    for group in mixed[: args.examples]:
        top = next(row for row in group if row["gold_reciprocal_rank"] == 1.0)
        other = next(row for row in group if row["gold_reciprocal_rank"] < 1.0)
        print(f"  on top: {top['completion'].strip()!r} | not: {other['completion'].strip()!r}")


if __name__ == "__main__":
    main()
