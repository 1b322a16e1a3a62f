"""The README and docs/: short enough to read, every relative link resolves (files and
#anchors), every file, `file.py:name` and called function they name exists (with the keywords
shown), the layers line is the layout test's, and nothing in the repository cites a file
outside it."""

from __future__ import annotations

import ast
import re
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from src.utils.resolvers import PROJECT_ROOT

PAGES = [PROJECT_ROOT / "README.md", *sorted((PROJECT_ROOT / "docs").rglob("*.md"))]
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
# files outside the repository that nothing in it may cite (spelled in parts: not a citation)
OUTSIDE = ("DESIGN" + ".md", "../" + "shared/")


def tracked(*patterns: str) -> list[str]:
    """The repository's tracked files (those matching `patterns`, git's pathspecs)."""
    return subprocess.run(
        ["git", "ls-files", *patterns], cwd=PROJECT_ROOT, capture_output=True, text=True, check=True
    ).stdout.split()


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
    citing = []
    for name in tracked():
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


# ------------------------------------------------------------------ code names in the docs
PY_NAME = re.compile(r"((?:[\w.-]+/)*[\w-]+\.py)\b(?::([A-Za-z_]\w*))?")
CALL = re.compile(r"`([A-Za-z_][\w.]*)\(([^`]*)\)`")
KEYWORD = re.compile(r"\b([A-Za-z_]\w*)=")
# dotted calls into other packages' names, not ours (`glue.`: a chunk package's glue module)
EXTERNAL = ("torch.", "F.", "np.", "mlflow.", "hydra.", "L.", "transformers.", "peft.", "glue.")


@dataclass
class Definitions:
    """What the repository's Python files define: each file's names (functions, classes,
    assigned names, at any depth), and each function's or class's parameters by name (a
    class's are its `__init__`'s; None where it takes **kwargs: any keyword goes)."""

    files: dict[str, set[str]] = field(default_factory=dict)
    parameters: dict[str, list[set[str] | None]] = field(default_factory=dict)

    def add(self, path: str, source: str) -> None:
        names = self.files.setdefault(path, set())
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                names.add(node.name)
                self.parameters.setdefault(node.name, []).append(accepted(node))
            elif isinstance(node, ast.Assign | ast.AnnAssign):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                for target in targets:
                    for leaf in ast.walk(target):
                        if isinstance(leaf, ast.Name):
                            names.add(leaf.id)
                        elif isinstance(leaf, ast.Attribute):
                            names.add(leaf.attr)

    def file(self, path: str) -> str | None:
        """The repository file that `path` names: itself, or the one file ending with it."""
        if path in self.files:
            return path
        found = [name for name in self.files if name.endswith("/" + path)]
        return found[0] if found else None


def accepted(node: ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) -> set[str] | None:
    """The keywords a function (or a class, by its `__init__`) accepts; None: any."""
    if isinstance(node, ast.ClassDef):
        inits = [
            item
            for item in node.body
            if isinstance(item, ast.FunctionDef) and item.name == "__init__"
        ]
        return accepted(inits[0]) if inits else None
    arguments = node.args
    if arguments.kwarg is not None:
        return None
    return {a.arg for a in [*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs]}


def repository_definitions() -> Definitions:
    """Every tracked Python file's definitions, keyed by its path in the repository."""
    definitions = Definitions()
    for name in tracked("*.py"):
        path = PROJECT_ROOT / name
        if path.is_file():
            definitions.add(name, path.read_text())
    return definitions


def wrong_file_names(text: str, definitions: Definitions) -> list[str]:
    """The `.py` files and `file.py:name`s `text` names that the repository does not have."""
    wrong = []
    for match in PY_NAME.finditer(text):
        path, name = match.groups()
        found = definitions.file(path)
        if found is None:
            wrong.append(f"no file {path}")
        elif name and name not in definitions.files[found]:
            wrong.append(f"{path} defines no {name}")
    return wrong


def wrong_code_names(text: str, definitions: Definitions) -> list[str]:
    """What `text` names that the code does not have: a `.py` file, a `file.py:name`, a
    `` `name(...)` `` call of a function nothing defines, or a keyword it does not take."""
    wrong = wrong_file_names(text, definitions)
    for match in CALL.finditer(text):
        called, arguments = match.groups()
        if called.startswith(EXTERNAL):
            continue
        name = called.rsplit(".", 1)[-1]
        if name not in definitions.parameters:
            wrong.append(f"nothing defines {called}()")
            continue
        takes = definitions.parameters[name]
        for keyword in KEYWORD.findall(arguments):
            if all(accepts is not None and keyword not in accepts for accepts in takes):
                wrong.append(f"{called}() takes no {keyword}=")
    return wrong


@pytest.fixture(scope="module")
def definitions() -> Definitions:
    return repository_definitions()


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(PROJECT_ROOT)))
def test_the_code_a_page_names_exists(page: Path, definitions: Definitions) -> None:
    assert wrong_code_names(page.read_text(), definitions) == []


def test_every_module_docstring_names_files_that_exist(definitions: Definitions) -> None:
    """A module's docstring names files of the repository as they are now (a file moved or
    renamed leaves a stale claim, such as a judge's old file named by the encoder it shares)."""
    import ast

    stale = {
        str(path.relative_to(PROJECT_ROOT)): wrong
        for path in sorted((PROJECT_ROOT / "src").rglob("*.py"))
        if (
            wrong := wrong_file_names(
                ast.get_docstring(ast.parse(path.read_text())) or "", definitions
            )
        )
    }
    assert stale == {}
    assert wrong_file_names("its judge (`char_judge.py`)", definitions) == ["no file char_judge.py"]


def test_a_planted_wrong_name_is_caught(definitions: Definitions) -> None:
    text = (
        "`grpo_loss(denominators=d)` and `grpo_loss(num_tokens=...)`, see "
        "src/grpo/objective.py:grpo_loss and objective.py:no_such_loss, "
        "`no_such_function()` in src/grpo/no_such_file.py"
    )
    assert wrong_code_names(text, definitions) == [
        "objective.py defines no no_such_loss",
        "no file src/grpo/no_such_file.py",
        "grpo_loss() takes no num_tokens=",
        "nothing defines no_such_function()",
    ]


def test_the_layers_line_is_the_layout_tests_ranks() -> None:
    from tests.test_layout import RANKS

    text = (PROJECT_ROOT / "docs" / "architecture.md").read_text()
    line = next(line for line in text.splitlines() if line.startswith("entry points ->"))
    ranks = [part.split(", ") for part in line.split(" -> ")]
    named = {"entry points": "entry"}
    found = {
        named.get(folder, folder): len(ranks) - i for i, part in enumerate(ranks) for folder in part
    }
    order = sorted(RANKS, key=lambda folder: -RANKS[folder])
    assert sorted(found, key=lambda folder: -found[folder]) == order
    for folder, rank in found.items():  # the same ties: each folder's neighbours by rank
        same = {f for f, r in found.items() if r == rank}
        assert same == {f for f in RANKS if RANKS[f] == RANKS[folder]}, folder


# folders that architecture.md describes as one file per item, not file by file
ONE_FILE_PER_ITEM = ("src/data/", "src/reward/")


def test_architecture_names_every_source_file() -> None:
    text = (PROJECT_ROOT / "docs" / "architecture.md").read_text()
    unnamed = [
        name
        for name in tracked("src/*.py")
        if not name.endswith("__init__.py")
        and not name.startswith(ONE_FILE_PER_ITEM)
        and not re.search(rf"\b{re.escape(Path(name).stem)}\b", text)
    ]
    assert unnamed == []
