"""The locked install: every package the project needs is pinned, within pyproject's ranges, and
the suite runs on exactly those versions (except under `make test-newest`)."""

from __future__ import annotations

import importlib.metadata
import os
import sys

import pytest
from packaging.requirements import Requirement

from src.utils.resolvers import PROJECT_ROOT

if sys.version_info >= (3, 11):
    import tomllib
else:  # Python 3.10: pytest's own dependency
    import tomli as tomllib


def pins() -> dict[str, str]:
    lines = (PROJECT_ROOT / "requirements.lock").read_text().splitlines()
    pairs = [line.split("==") for line in lines if line and not line.startswith("#")]
    return {name: version for name, version in pairs}


def declared() -> list[Requirement]:
    """The requirements of pyproject.toml: the project's and its dev extra's."""
    project = tomllib.loads((PROJECT_ROOT / "pyproject.toml").read_text())["project"]
    lines = [*project["dependencies"], *project["optional-dependencies"]["dev"]]
    return [Requirement(line) for line in lines]


def canonical(name: str) -> str:
    return name.lower().replace("_", "-").replace(".", "-")


def test_every_declared_package_is_pinned_within_its_range() -> None:
    locked = pins()
    for requirement in declared():
        name = canonical(requirement.name)
        assert name in locked, f"{name} is not in requirements.lock: run make lock"
        assert requirement.specifier.contains(locked[name], prereleases=True), name


def test_the_fast_paths_packages_are_bounded_above() -> None:
    bounded = {canonical(r.name): r.specifier for r in declared()}
    for name in ("torch", "transformers", "peft"):
        assert any(spec.operator == "<" for spec in bounded[name]), name


@pytest.mark.skipif(bool(os.environ.get("GRPO_UNLOCKED")), reason="make test-newest")
def test_the_installed_versions_are_the_locked_ones() -> None:
    wrong = {}
    for name, version in pins().items():
        try:
            installed = importlib.metadata.version(name).split("+")[0]
        except importlib.metadata.PackageNotFoundError:
            installed = None
        if installed != version:
            wrong[name] = (installed, version)
    assert not wrong, f"installed versus locked (run make test to reinstall): {wrong}"
