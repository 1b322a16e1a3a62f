"""Registry: functions chosen by name register once, keep what they declare, and a name not
held is refused with the choices listed."""

from __future__ import annotations

import pytest

from src.grpo.advantages import ESTIMATORS
from src.grpo.objective import AGGREGATIONS, TRL_LOSS_TYPES
from src.grpo.policy_losses import POLICY_LOSSES, settings_read
from src.utils.registry import Registry


def test_an_entry_is_registered_once_with_its_facts():
    registry: Registry = Registry("greeting")

    @registry.register("hello", polite=True)
    def hello() -> str:
        return "hello"

    assert registry.named("hello") is hello and registry.facts["hello"] == {"polite": True}
    with pytest.raises(ValueError, match="greeting 'hello' is registered twice"):
        registry.register("hello")(hello)
    with pytest.raises(ValueError, match=r"greeting must be one of \['hello'\], got 'bye'"):
        registry.named("bye")


def test_estimators_losses_and_aggregations_are_registries():
    assert sorted(ESTIMATORS) == ["grpo", "reinforce_pp", "rloo"]
    assert sorted(POLICY_LOSSES) == ["cispo", "clip", "sapo"]
    assert set(AGGREGATIONS) == set(TRL_LOSS_TYPES.values())
    assert settings_read("cispo") == ("epsilon_high",)
