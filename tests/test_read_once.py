"""No setting is read from the config after the settings are built: the code reads the checked
settings objects (`AlgoSettings`, `DataSettings`, `RoomSettings`, `EvalSettings`,
`SftSettings`, ...), each built once right after the settings check, and hands a section
whole to the part it builds (`build(cfg.rollout)`). A raw read (`cfg.room.k`,
`cfg.sft.get("enabled")`, `cfg.trainer["max_steps"]`) would take a value the check did not
convert, after it was checked."""

from __future__ import annotations

import ast
from pathlib import Path

from src.utils.resolvers import PROJECT_ROOT

SOURCE = PROJECT_ROOT / "src"
# the config's sections (its top-level keys that hold keys); `cfg.task_name` and the like are
# single values, read where they are used
SECTIONS = {
    "algo", "data", "eval", "model", "policy", "reward", "retrieval", "rollout", "room",
    "sampling", "sft", "trainer", "callbacks", "logger", "paths", "pipeline", "stages",
    "rounds", "before_grpo", "hardware",
}  # fmt: skip
# calls a section is handed to whole: built into its part, made plain for a settings object,
# written out for a hash or a record
WHOLE = {"build", "plain", "to_container", "from_config", "of", "of_section", "instantiate"}
# the settings check itself reads the raw config, once, before anything is built
CHECKS = {"runs/settings.py", "runs/schema.py", "runs/read_keys.py", "runs/sweep_check.py"}


def raw_reads(path: Path) -> list[str]:  # "line: read", in the file's order
    """`cfg.<section>.<key>`, `cfg.<section>.get(...)` and `cfg.<section>[...]` in `path`
    that are not the argument of a call that takes the section whole."""
    tree = ast.parse(path.read_text())
    handed: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            name = (
                node.func.attr
                if isinstance(node.func, ast.Attribute)
                else getattr(node.func, "id", "")
            )
            if name in WHOLE:  # the section itself, or `cfg.<section>.get(name)` of a part
                for arg in [*node.args, *(k.value for k in node.keywords)]:
                    handed |= {id(arg), id(arg.func) if isinstance(arg, ast.Call) else 0}
    found = []
    for node in ast.walk(tree):
        inner = node.value if isinstance(node, ast.Attribute | ast.Subscript) else None
        if (
            isinstance(inner, ast.Attribute)
            and isinstance(inner.value, ast.Name)
            and inner.value.id == "cfg"
            and inner.attr in SECTIONS
            and id(node) not in handed
        ):
            found.append((node.lineno, ast.unparse(node)))
    return [f"{line}: {read}" for line, read in sorted(found)]


# the raw reads not yet turned into settings objects, by file: the count may only fall (lower
# it here when a read goes; a new file or a higher count fails). What is left: the run folders
# (`paths.*`), the stages' and char_diffusion's rounds' keyed sections (`stages[name]`,
# `rounds.*`), and the trainer's accelerator read by the char recipe's stages
NOT_YET = {
    "preflight.py": 1,
    "pretraining/folders.py": 5,
    "pretraining/task_run.py": 2,
    "recipes/char_diffusion/judge_stage.py": 1,
    "recipes/char_diffusion/masked_lm.py": 1,
    "recipes/char_diffusion/rounds.py": 4,
    "runs/resume.py": 1,
}


def test_no_setting_is_read_from_the_config_after_the_settings_are_built():
    found: dict[str, list[str]] = {}
    for path in sorted(SOURCE.rglob("*.py")):
        name = str(path.relative_to(SOURCE))
        if name not in CHECKS and (reads := raw_reads(path)):
            found[name] = reads
    new = {name: reads for name, reads in found.items() if len(reads) > NOT_YET.get(name, 0)}
    assert new == {}, "raw config reads: " + "; ".join(
        f"{name}:{read}" for name, reads in new.items() for read in reads
    )
    fewer = {name: len(found.get(name, [])) for name in NOT_YET}
    assert fewer == NOT_YET, f"fewer raw reads than NOT_YET says; lower it to {fewer}"


def test_a_raw_read_is_found(tmp_path):
    """The walk sees a planted read of each form, and lets a section handed whole pass."""
    planted = tmp_path / "planted_read.py"
    planted.write_text(
        "def f(cfg):\n"
        "    build(cfg.rollout)\n"
        "    a = cfg.room.k\n"
        "    b = cfg.sft.get('enabled')\n"
        "    c = cfg.trainer['max_steps']\n"
    )
    assert raw_reads(planted) == ["3: cfg.room.k", "4: cfg.sft.get", "5: cfg.trainer['max_steps']"]
