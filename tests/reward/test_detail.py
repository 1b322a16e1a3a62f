"""A reward term from what the role reported per completion (`Outcomes.details`)."""

from __future__ import annotations

import pytest

from src.reward.combine import CombinedReward
from src.reward.detail import RoleDetail
from src.utils.errors import ConfigError


def test_true_false_and_numbers_are_scored():
    reward = RoleDetail("gold_retrieved")
    details = [{"gold_retrieved": True}, {"gold_retrieved": False}, {"gold_retrieved": 0.25}]
    assert reward.score_details(details) == [1.0, 0.0, 0.25]


def test_combined_with_an_outcome_reward_by_weight():
    combined = CombinedReward(
        {
            "exact": lambda outcomes, rows: [float(o == "A") for o in outcomes],
            "gold": RoleDetail("gold_retrieved"),
        },
        {"exact": 1.0, "gold": 0.5},
    )
    details = [{"gold_retrieved": True}, {"gold_retrieved": True}, {"gold_retrieved": False}]
    scores = combined(["A", "B", "A"], [{}, {}, {}], [3, 3, 3], details)
    assert scores.total.tolist() == [1.5, 0.5, 1.0]
    assert scores.parts["gold"].tolist() == [1.0, 1.0, 0.0]
    with pytest.raises(ValueError, match="details"):
        combined(["A"], [{}], [3])  # a caller that gives no details


def test_a_detail_the_role_does_not_report_is_a_setting_error():
    with pytest.raises(ConfigError, match=r"no detail named 'gold_retrieved'.*\['queries'\]"):
        RoleDetail("gold_retrieved").score_details([{"queries": ["q"]}])
    with pytest.raises(ConfigError, match="not a number"):
        RoleDetail("queries").score_details([{"queries": ["q"]}])
    with pytest.raises(ConfigError, match="key"):
        RoleDetail("")
