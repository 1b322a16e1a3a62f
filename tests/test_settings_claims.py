"""What the settings modules say of themselves holds: a module whose docstring says its
settings object is "checked against their declaration (`src/<folder>/keys.py`)" or "declared
once in" that file holds each field of the object to that file's declaration of the key
`SECTION.field`, and where it says the object is "built once ... by `runs/<file>.py`", that
file builds it. A settings object whose field no table declares would pass unchecked."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import re
import sys
from dataclasses import fields

import pytest

import src
from src.runs.schema import declared, setting_of
from src.utils.resolvers import PROJECT_ROOT
from src.utils.setting import Declared

CLAIM = re.compile(
    r"(?:checked against (?:their|its) declaration|declared once in)\s*\(?`(src/[\w/]+\.py)`"
)
BUILT_BY = re.compile(r"built once from the config's keys by `(runs/\w+\.py)`")
# fields that are no key of the config, with what they hold instead
NOT_KEYS = {
    ("EvalSettings", "default_adapters"): "which adapters the config left at their defaults"
}
# fields that follow a key of another section, checked under that key's name (the module says so)
ELSEWHERE = {
    ("SamplingSettings", "max_completion_length"): "algo.max_completion_length",
    ("DataSettings", "num_batches"): "trainer.max_steps",
    ("DataSettings", "rounds_per_step"): "algo.sampling_rounds",
}


def settings_classes() -> list[type[Declared]]:
    """Every `Declared` subclass in src/, each once."""
    for module in pkgutil.walk_packages(src.__path__, "src."):
        importlib.import_module(module.name)
    found = {
        cls
        for module in list(sys.modules.values())
        if getattr(module, "__name__", "").startswith("src.")
        for cls in vars(module).values()
        if inspect.isclass(cls) and issubclass(cls, Declared) and cls is not Declared
    }
    return sorted(found, key=lambda cls: f"{cls.__module__}.{cls.__name__}")


def first_paragraph(cls: type) -> str:
    return " ".join((sys.modules[cls.__module__].__doc__ or "").split("\n\n")[0].split())


@pytest.mark.parametrize("cls", settings_classes(), ids=lambda cls: cls.__name__)
def test_every_field_is_a_declared_key(cls):
    unchecked = [
        f.name
        for f in fields(cls)
        if (cls.__name__, f.name) not in {**NOT_KEYS, **ELSEWHERE}
        and not declared(f"{cls.SECTION}.{f.name}", dict(cls.TABLE))
    ]
    assert unchecked == [], f"{cls.__name__}: fields no table declares: {unchecked}"


@pytest.mark.parametrize("cls", settings_classes(), ids=lambda cls: cls.__name__)
def test_the_module_says_where_its_settings_are_declared_and_built_and_it_holds(cls):
    text = first_paragraph(cls)
    claim = CLAIM.search(text)
    if cls.__module__.endswith("settings"):  # a settings module names its table
        assert claim, f"{cls.__module__}: its first paragraph names no keys.py: {text}"
    if claim:
        path = claim.group(1)
        table = importlib.import_module(path.removesuffix(".py").replace("/", ".")).SETTINGS
        for f in fields(cls):
            key = f"{cls.SECTION}.{f.name}"
            if (cls.__name__, f.name) in ELSEWHERE:
                assert ELSEWHERE[cls.__name__, f.name] in text
                continue
            if (cls.__name__, f.name) in NOT_KEYS or setting_of(key, dict(cls.TABLE)) is None:
                continue  # a mapping of keys declared one by one (sft.optimizer.lr)
            assert setting_of(key, table) == setting_of(key, dict(cls.TABLE)), (
                f"{cls.__name__}.{f.name}: {path} declares {key} otherwise, or not at all"
            )
    built = BUILT_BY.search(text)
    if built:
        builder = (PROJECT_ROOT / "src" / built.group(1)).read_text()
        assert any(
            f"{cls.__name__}.{way}(" in builder for way in ("of_section", "of", "from_config")
        ), f"{cls.__module__} says {built.group(1)} builds {cls.__name__}; it does not"


def test_a_false_claim_is_caught(monkeypatch):
    """A settings module that names another folder's table is caught."""
    from src.sft import sft_settings

    monkeypatch.setattr(
        sft_settings,
        "__doc__",
        "Built once ... and checked against their declaration (`src/data/keys.py`).",
    )
    with pytest.raises(AssertionError, match="src/data/keys.py declares sft.enabled otherwise"):
        test_the_module_says_where_its_settings_are_declared_and_built_and_it_holds(
            sft_settings.SftSettings
        )
