"""The layout's promise, checked on the source: imports point one way, from the entry points
down to utils; `utils/` and `tracking/` import nothing from the domain; no folders import each
other in a cycle."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from src.utils.resolvers import PROJECT_ROOT

SRC = PROJECT_ROOT / "src"
# Higher imports lower, never the other way. Folders of one rank may not import each other.
RANKS = {
    "entry": 8,  # src/train.py, eval.py, pipeline.py
    "recipes": 7,  # a recipe's own parts, reached from conf/ only (src/recipes/<name>/)
    "runs": 6,
    "grpo": 5,
    "sft": 5,
    "pretraining": 5,
    "evaluation": 4,
    "policy": 3,
    "rollout": 2,
    "reward": 2,
    "retrieval": 2,
    "model": 1,
    "data": 1,
    "tracking": 1,
    "utils": 0,
}


def folder_of(module: str) -> str:
    """`src.grpo.module` -> grpo; `src.train` (a top-level file) -> entry."""
    parts = module.split(".")
    if len(parts) == 2 and (SRC / f"{parts[1]}.py").is_file():
        return "entry"
    return parts[1]


def project_imports(path: Path) -> set[str]:
    """Every `src.*` module a file imports, at any depth (function bodies included)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names if alias.name.startswith("src."))
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("src."):
            found.add(node.module)
    return found


def folder_edges(root: Path) -> dict[tuple[str, str], list[str]]:
    """(importing folder, imported folder) -> the files that make that edge."""
    edges: dict[tuple[str, str], list[str]] = {}
    for path in sorted(root.rglob("*.py")):
        if path == root / "__init__.py":
            continue
        module = ".".join(path.relative_to(root.parent).with_suffix("").parts)
        source = folder_of(module)
        for imported in project_imports(path):
            target = folder_of(imported)
            if target != source:
                edges.setdefault((source, target), []).append(str(path.relative_to(root.parent)))
    return edges


def find_cycle(edges: set[tuple[str, str]]) -> list[str] | None:
    """A cycle in the folder graph, as the folders along it, or None."""
    graph: dict[str, set[str]] = {}
    for source, target in edges:
        graph.setdefault(source, set()).add(target)
    state: dict[str, int] = {}  # 1 on the current path, 2 done

    def visit(node: str, path: list[str]) -> list[str] | None:
        state[node] = 1
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return [*path[path.index(nxt) :], nxt] if nxt in path else [node, nxt]
            if nxt not in state and (cycle := visit(nxt, [*path, nxt])):
                return cycle
        state[node] = 2
        return None

    for start in sorted(graph):
        if start not in state and (cycle := visit(start, [start])):
            return cycle
    return None


def layer_violations(edges: dict[tuple[str, str], list[str]]) -> list[str]:
    """Edges that point upward or sideways, or into a folder the layout does not know."""
    wrong = []
    for (source, target), files in sorted(edges.items()):
        if source not in RANKS or target not in RANKS:
            wrong.append(f"{source} -> {target}: unknown folder (add it to RANKS): {files}")
        elif RANKS[target] >= RANKS[source]:
            wrong.append(f"{source} -> {target}: {files}")
    return wrong


def test_imports_point_one_way():
    edges = folder_edges(SRC)
    assert ("grpo", "model") in edges  # the walk sees imports at all
    assert layer_violations(edges) == []
    assert find_cycle(set(edges)) is None


def test_utils_and_tracking_import_nothing_from_the_domain():
    for (source, target), files in folder_edges(SRC).items():
        if source in ("utils", "tracking"):
            assert target == "utils", f"{source} imports {target}: {files}"


@pytest.mark.parametrize(
    ("files", "complaint"),
    [
        ({"utils/helper.py": "from src.grpo.module import X\n"}, "utils -> grpo"),
        (
            {"tracking/log.py": "def f():\n    from src.model.causal_lm import CausalLM\n"},
            "tracking -> model",
        ),
        ({"model/net.py": "import src.rollout.hf\n"}, "model -> rollout"),
    ],
)
def test_a_wrong_import_is_caught(tmp_path, files, complaint):
    root = tmp_path / "src"
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    (root / "grpo").mkdir(exist_ok=True)
    assert any(line.startswith(complaint) for line in layer_violations(folder_edges(root)))


def test_a_cycle_is_found():
    assert find_cycle({("model", "rollout"), ("rollout", "policy"), ("policy", "model")})
    assert find_cycle({("a", "b"), ("b", "c")}) is None


def test_the_core_never_imports_a_recipe_and_a_recipe_no_other():
    """A recipe's folder (src/recipes/<name>/) is reached from conf/ only: no other folder, the
    entry points included, imports it, and it imports no other recipe."""
    edges = folder_edges(SRC)
    assert [
        (source, files) for (source, target), files in edges.items() if target == "recipes"
    ] == []
    for path in sorted((SRC / "recipes").rglob("*.py")):
        own = path.relative_to(SRC / "recipes").parts[0]
        others = {
            module
            for module in project_imports(path)
            if module.startswith("src.recipes.") and module.split(".")[2] != own
        }
        assert others == set(), path
    assert ("recipes", "runs") in edges  # the walk sees the recipes' imports at all


def experiment_depth(name: str, folder: Path) -> int:
    """How many experiment files a run of `experiment=name` reads above its task: the file
    itself, and each other experiment its defaults list names (a bare name, its own group)."""
    from omegaconf import OmegaConf

    defaults = OmegaConf.load(folder / f"{name}.yaml").get("defaults") or []
    parents = [entry for entry in defaults if isinstance(entry, str) and entry != "_self_"]
    return 1 + max((experiment_depth(parent, folder) for parent in parents), default=0)


def test_an_experiment_is_at_most_two_files_above_its_task(tmp_path):
    """A reader follows an experiment to its task through at most one other experiment."""
    folder = PROJECT_ROOT / "conf" / "experiment"
    depths = {path.stem: experiment_depth(path.stem, folder) for path in folder.glob("*.yaml")}
    assert {name: depth for name, depth in depths.items() if depth > 2} == {}
    for name, text in {
        "a": "defaults:\n  - override /task: arithmetic\n",
        "b": "defaults:\n  - a\n",
        "c": "defaults:\n  - b\n  - _self_\n",
    }.items():
        (tmp_path / f"{name}.yaml").write_text(text)
    assert [experiment_depth(name, tmp_path) for name in "abc"] == [1, 2, 3]  # c is caught


MAX_PARAMETERS = 8  # a function taking more takes a settings object instead
MAX_LINES = 80  # a function longer is split into named steps


def parameter_count(function: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    """Its parameters, `self` and `cls` left out, `*args` and `**keys` counted once each."""
    arguments = function.args
    names = [*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs]
    count = len(names) + (arguments.vararg is not None) + (arguments.kwarg is not None)
    return count - (bool(names) and names[0].arg in ("self", "cls"))


def oversized(source: str, name: str) -> list[str]:
    """The functions of `source` over `MAX_PARAMETERS` parameters or `MAX_LINES` lines."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            lines = node.end_lineno - node.lineno + 1
            if parameter_count(node) > MAX_PARAMETERS or lines > MAX_LINES:
                found.append(f"{name}:{node.lineno} {node.name}")
    return found


def test_no_function_takes_more_than_8_parameters_or_runs_over_80_lines():
    found = [
        entry
        for path in sorted(SRC.rglob("*.py"))
        for entry in oversized(path.read_text(), str(path.relative_to(PROJECT_ROOT)))
    ]
    assert found == []
    nine = "def f(self, a, b, c, d, e, f, g, h, i):\n    pass\n"
    eight = "def f(self, a, b, c, d, e, f, g, *rest):\n    pass\n"
    long = "def f():\n" + "    x = 1\n" * 80
    assert oversized(nine, "x") == ["x:1 f"] and oversized(eight, "x") == []
    assert oversized(long, "x") == ["x:1 f"]
