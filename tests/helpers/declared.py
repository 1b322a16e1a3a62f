"""What the settings check answers a config holding only some keys: a part's own values are
checked there, once, and never again by its constructor (tests/test_declared_once.py)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest
from omegaconf import OmegaConf

from src.runs.schema import SETTINGS, check_schema
from src.utils.errors import ConfigError
from src.utils.setting import AnyOf, Setting


def refusal(values: Mapping[str, Any], table: Mapping[str, Setting | AnyOf] | None = None) -> str:
    """The one line `check_schema` raises for a config of the dotted keys `values` (the run's
    table, or `table`, such as a recipe's own); fails the test where it raises none."""
    cfg = OmegaConf.create({})
    for key, value in values.items():
        OmegaConf.update(cfg, key, value, force_add=True)
    with pytest.raises(ConfigError) as raised:
        check_schema(cfg, dict(table or SETTINGS))
    return str(raised.value)
