"""A key is checked where it is declared (its folder's keys.py, read by the settings check and
by the part's settings object), never again in a constructor: a constructor's `if` over one
declared key's value alone, raising with that key's name, restates the declaration and is
caught here. Checks across keys (a minimum below a maximum) and of what a value refers to (a
stage of this task) belong in constructors and are not caught."""

from __future__ import annotations

import ast
import re

from src.recipes.char_diffusion.settings import SETTINGS as CHAR_SETTINGS
from src.runs.schema import SETTINGS
from src.utils.resolvers import PROJECT_ROOT

SRC = PROJECT_ROOT / "src"
DECLARED = set(SETTINGS) | set(CHAR_SETTINGS)
CHECKERS = ("__init__", "__post_init__")


def names_read(test: ast.expr) -> set[str]:
    """The variables an `if` test reads: bare names and `self.<name>` attributes (not the
    module's constants, in capitals, nor the builtins it calls)."""
    found = set()
    for node in ast.walk(test):
        if isinstance(node, ast.Name) and node.id != "self" and not node.id.isupper():
            found.add(node.id)
        elif (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id == "self"
        ):
            found.add(node.attr)
    return found - {"len", "isinstance", "str", "int", "float", "bool", "any", "all"}


def message(raised: ast.Raise) -> str:
    """The literal text of a raised call's arguments, fields left out."""
    if not isinstance(raised.exc, ast.Call):
        return ""
    parts = []
    for argument in raised.exc.args:
        for node in ast.walk(argument):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                parts.append(node.value)
    return "".join(parts)


def names(key: str, variable: str, words: str) -> bool:
    """Whether an `if` over `variable` raising `words` checks declared `key` again: the
    variable is the key's last part (any variable for a key ending in `*`, whose part is a
    name), and the words name the key, a `*` part standing for any name, or for a field left
    out of the text (`f"reward.weights.{name} ..."`)."""
    last = key.rsplit(".", 1)[-1]
    pattern = re.escape(key).replace(r"\*", r"\w*") + r"(?!\w)"
    return last in ("*", variable) and re.search(pattern, words) is not None


def second_checks(source: str, name: str, declared: set[str] = DECLARED) -> list[str]:
    """`file:line key` for each constructor `if` over one declared key's value alone that
    raises naming the key."""
    found = []
    for function in ast.walk(ast.parse(source)):
        if not (isinstance(function, ast.FunctionDef) and function.name in CHECKERS):
            continue
        for branch in ast.walk(function):
            if not isinstance(branch, ast.If):
                continue
            read = names_read(branch.test)
            if len(read) != 1:
                continue
            (variable,) = read
            for raised in (node for node in branch.body if isinstance(node, ast.Raise)):
                words = message(raised)
                found += [
                    f"{name}:{branch.lineno} {key}"
                    for key in declared
                    if names(key, variable, words)
                ]
    return found


def test_no_constructor_checks_a_declared_key_again():
    found = [
        entry
        for path in sorted(SRC.rglob("*.py"))
        for entry in second_checks(path.read_text(), str(path.relative_to(PROJECT_ROOT)))
    ]
    assert found == []


def test_a_planted_second_check_is_caught_and_a_check_across_keys_is_not():
    planted = (
        "class Part:\n"
        "    def __init__(self, k, low, high):\n"
        "        if k < 1:\n"
        "            raise ConfigError(f'policy.k must be >= 1, got {k}')\n"
        "        if low > high:\n"
        "            raise ConfigError('data.min_span must be at most data.max_span')\n"
    )
    assert second_checks(planted, "x.py") == ["x.py:3 policy.k"]


def test_a_planted_second_check_of_a_key_under_a_star_is_caught():
    """`reward.functions.*.batch_size` and `reward.weights.*`, named with the function's name
    written out or as a field."""
    planted = (
        "class Part:\n"
        "    def __init__(self, batch_size, weight, name):\n"
        "        if batch_size < 1:\n"
        "            raise ConfigError(f'reward.functions.judge.batch_size must be >= 1, got {batch_size}')\n"
        "        if weight < 0:\n"
        "            raise ConfigError(f'reward.weights.{name} must be >= 0, got {weight}')\n"
    )
    declared = {"reward.functions.*.batch_size", "reward.weights.*"}
    assert second_checks(planted, "x.py", declared) == [
        "x.py:3 reward.functions.*.batch_size",
        "x.py:5 reward.weights.*",
    ]


def declaration_calls(source: str, name: str) -> list[str]:
    """`file:line` for each call of `checked(...)` inside a constructor."""
    return [
        f"{name}:{call.lineno}"
        for function in ast.walk(ast.parse(source))
        if isinstance(function, ast.FunctionDef) and function.name in CHECKERS
        for call in ast.walk(function)
        if isinstance(call, ast.Call)
        and isinstance(call.func, ast.Name)
        and call.func.id == "checked"
    ]


def test_no_constructor_holds_a_key_to_its_declaration_again():
    """The settings check holds every key of the config to its declaration before any part is
    built; only `Declared` itself does so for the fields of a settings object."""
    found = [
        entry
        for path in sorted(SRC.rglob("*.py"))
        for entry in declaration_calls(path.read_text(), str(path.relative_to(PROJECT_ROOT)))
    ]
    assert len(found) == 1 and found[0].startswith("src/utils/setting.py:")  # Declared
    planted = "class Part:\n    def __init__(self, k):\n        checked(SETTINGS, 'policy.k', k)\n"
    assert declaration_calls(planted, "x.py") == ["x.py:3"]
