"""Write `requirements.lock`: the exact release of every package the project and its dev extra
need, as pip resolves them today within the ranges of `pyproject.toml`.

pip resolves without installing anything (`pip install --dry-run --report`), with the torch
build the Makefile installs first, and the lock keeps one `name==version` line per package
(the project itself left out; local version labels such as `+cpu` dropped, since the Makefile
installs torch on its own). `make test` then installs exactly these versions.

    make lock                                    # what maintainers run
    python scripts/lock.py --torch torch==2.13.0 --out requirements.lock
"""

from __future__ import annotations

import argparse
import json
import platform
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PROJECT = "grpo-lab"


def resolve(torch: str, extras: str) -> dict[str, str]:
    """name -> version of everything pip would install for the project with `extras`."""
    with tempfile.TemporaryDirectory() as scratch:
        report = Path(scratch) / "report.json"
        command = [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--dry-run",
            "--ignore-installed",
            "--quiet",
            "--report",
            str(report),
            torch,
            f"{ROOT}[{extras}]",
        ]
        subprocess.run(command, check=True)
        installed = json.loads(report.read_text())["install"]
    versions = {}
    for item in installed:
        name = item["metadata"]["name"].lower().replace("_", "-")
        if name != PROJECT:
            versions[name] = item["metadata"]["version"].split("+")[0]
    return versions


def lock_text(versions: dict[str, str], torch: str) -> str:
    """The lock file: a header saying where it was resolved, then one pin per line."""
    header = [
        "# The exact versions `make test` and `make train` install (after the torch build the",
        "# Makefile installs first). Regenerate with `make lock`, then run `make test`.",
        f"# Resolved by scripts/lock.py with {torch} for Python "
        f"{platform.python_version()} on {platform.system()} {platform.machine()}.",
    ]
    return "\n".join([*header, *(f"{n}=={v}" for n, v in sorted(versions.items()))]) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--torch", default="torch==2.13.0", help="the torch requirement")
    parser.add_argument("--extras", default="dev", help="the extras to lock with the project")
    parser.add_argument("--out", type=Path, default=ROOT / "requirements.lock")
    args = parser.parse_args()
    versions = resolve(args.torch, args.extras)
    args.out.write_text(lock_text(versions, args.torch))
    print(f"wrote {args.out}: {len(versions)} packages")


if __name__ == "__main__":
    main()
