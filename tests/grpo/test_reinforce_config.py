"""`algo=reinforce`: GRPO's settings with a group-mean baseline and no std scaling or clipping."""

from __future__ import annotations

import math

from omegaconf import OmegaConf

from src.utils.compose import compose_train_config

CHANGED = {"scale_rewards", "epsilon_low", "epsilon_high", "num_iterations"}


def algo(choice: str) -> dict:
    cfg = compose_train_config([f"algo={choice}", "paths.run_dir=unused"])
    return OmegaConf.to_container(cfg.algo, resolve=False)


def test_reinforce_composes_over_the_grpo_settings() -> None:
    grpo, reinforce = algo("grpo"), algo("reinforce")
    assert reinforce["scale_rewards"] == "none"
    assert reinforce["epsilon_low"] == math.inf and reinforce["epsilon_high"] == math.inf
    assert reinforce["num_iterations"] == 1
    # Everything else is GRPO's, the task's overrides (the arithmetic learning rate) included.
    assert reinforce["_target_"] == grpo["_target_"] == "src.grpo.module.GRPOModule"
    assert reinforce["optimizer"]["lr"] == grpo["optimizer"]["lr"]
    assert reinforce["max_completion_length"] == grpo["max_completion_length"]
    assert set(reinforce) == set(grpo)
    assert {k: v for k, v in reinforce.items() if k not in CHANGED} == {
        k: v for k, v in grpo.items() if k not in CHANGED
    }
    assert grpo["scale_rewards"] == "group" and grpo["epsilon_low"] == 0.2
