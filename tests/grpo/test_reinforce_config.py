"""`algo=reinforce`: GRPO's settings with a group-mean baseline and no std scaling or clipping."""

from __future__ import annotations

import math

from omegaconf import OmegaConf

from src.grpo.settings import BUILT_KEYS, AlgoSettings, setting_names
from src.utils.compose import compose_train_config
from src.utils.resolvers import PROJECT_ROOT

PRESETS = ("grpo", "dr_grpo", "dapo", "gspo", "rloo", "reinforce_pp", "cispo", "reinforce")
# The recipes' own methods, which their tasks choose with `override /algo:`.
RECIPES = ("math", "reader", "medqa_rewriter", "char_diffusion")

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
    assert "_target_" not in grpo
    assert reinforce["optimizer"]["lr"] == grpo["optimizer"]["lr"]
    assert reinforce["max_completion_length"] == grpo["max_completion_length"]
    assert set(reinforce) == set(grpo)
    assert {k: v for k, v in reinforce.items() if k not in CHANGED} == {
        k: v for k, v in grpo.items() if k not in CHANGED
    }
    assert grpo["scale_rewards"] == "group" and grpo["epsilon_low"] == 0.2


def test_the_algorithm_presets_change_only_what_their_method_changes() -> None:
    """Each preset composes over GRPO's settings and changes only its own keys."""
    grpo = algo("grpo")
    changes = {
        "dr_grpo": {"scale_rewards": "none", "loss_type": "dr_grpo"},
        "dapo": {"epsilon_high": 0.28, "loss_type": "dapo", "sampling_rounds": 3},
        "rloo": {"advantage_estimator": "rloo", "scale_rewards": "none"},
        "reinforce_pp": {"advantage_estimator": "reinforce_pp", "scale_rewards": "none"},
        "cispo": {
            "policy_loss": "cispo",
            "epsilon_high": 5.0,
            "loss_type": "token-mean",
            "num_iterations": 4,
        },
        "gspo": {
            "importance_sampling_level": "sequence",
            "epsilon_low": 3e-4,
            "epsilon_high": 4e-4,
            "num_iterations": 4,
        },
        "math": {"kl_beta": 0.1},
        "reader": {"kl_beta": 0.1, "top_k_ratio": 0.5},
        "medqa_rewriter": {"kl_beta": 0.02},
        "char_diffusion": {"kl_beta": 0.3},
    }
    assert set(changes) == set(PRESETS + RECIPES) - {"grpo", "reinforce"}
    for choice, changed in changes.items():
        preset = algo(choice)
        assert set(preset) == set(grpo), choice
        assert {k: v for k, v in preset.items() if preset[k] != grpo[k]} == changed, choice


def test_the_settings_are_declared_once_and_every_preset_is_a_valid_set() -> None:
    """conf/algo/grpo.yaml holds exactly AlgoSettings' keys (and what builds the module), and
    every preset's values pass its types and checks."""
    names = setting_names()
    grpo = algo("grpo")
    assert set(grpo) == set(names) | set(BUILT_KEYS)
    for choice in PRESETS + RECIPES:
        cfg = compose_train_config([f"algo={choice}", "paths.run_dir=unused"])
        plain = OmegaConf.to_container(cfg.algo, resolve=True)
        settings = AlgoSettings.from_config(plain)
        assert settings.group_size == plain["group_size"], choice


def test_the_configuration_page_documents_every_setting() -> None:
    page = (PROJECT_ROOT / "docs" / "configuration.md").read_text()
    table = page[page.index("## GRPO settings") : page.index("## Sweeps")]
    documented = set()
    for line in table.splitlines():
        if line.startswith("| `"):
            documented |= {part.strip("` ") for part in line.split("|")[1].split(",")}
    assert documented == set(setting_names())
