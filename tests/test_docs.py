"""The README and docs/: short enough to read, every relative link resolves (files and
#anchors), and nothing in the repository cites a file outside it."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from src.utils.resolvers import PROJECT_ROOT

PAGES = [PROJECT_ROOT / "README.md", *sorted((PROJECT_ROOT / "docs").rglob("*.md"))]
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
# files outside the repository that nothing in it may cite (spelled in parts: not a citation)
OUTSIDE = ("DESIGN" + ".md", "../" + "shared/")


def anchors(page: Path) -> set[str]:
    """GitHub's anchors of a page's headings: lower case, punctuation dropped, spaces to -."""
    found = set()
    for line in page.read_text().splitlines():
        if line.startswith("#"):
            title = line.lstrip("#").strip().lower()
            found.add(re.sub(r"\s", "-", re.sub(r"[^\w\s-]", "", title)))
    return found


def test_the_readme_reads_in_five_minutes() -> None:
    assert len((PROJECT_ROOT / "README.md").read_text().splitlines()) <= 250


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(PROJECT_ROOT)))
def test_every_link_resolves(page: Path) -> None:
    broken = []
    for target in LINK.findall(page.read_text()):
        if re.match(r"[a-z]+:", target):
            continue  # http:, https:, mailto: are outside the repository
        path, _, anchor = target.partition("#")
        linked = (page.parent / path).resolve() if path else page
        if (
            not linked.exists()
            or anchor
            and linked.suffix == ".md"
            and anchor not in anchors(linked)
        ):
            broken.append(target)
    assert not broken, f"{page.name}: broken links {broken}"


def test_nothing_cites_a_file_outside_the_repository() -> None:
    tracked = subprocess.run(
        ["git", "ls-files"], cwd=PROJECT_ROOT, capture_output=True, text=True, check=True
    ).stdout.split()
    citing = []
    for name in tracked:
        path = PROJECT_ROOT / name
        if (
            path.suffix not in {".py", ".md", ".yaml", ".sh", ".toml", ".ipynb"}
            or not path.is_file()
        ):
            continue
        text = path.read_text(errors="ignore")
        if any(cited in text for cited in OUTSIDE):
            citing.append(name)
    assert not citing
