"""Compose the training config from Python, exactly as `python -m src.train` would."""

from __future__ import annotations

from collections.abc import Sequence

from hydra import compose, initialize_config_dir
from hydra.core.global_hydra import GlobalHydra
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig, open_dict

from src.utils.resolvers import PROJECT_ROOT

CONFIG_DIR = PROJECT_ROOT / "conf"


def compose_config(overrides: Sequence[str] = (), config_name: str = "train") -> DictConfig:
    """`conf/<config_name>.yaml` with command-line style overrides, Hydra's own node included,
    as `@hydra.main` composes it (nothing resolved, no Hydra job started)."""
    GlobalHydra.instance().clear()
    with initialize_config_dir(version_base="1.3", config_dir=str(CONFIG_DIR)):
        return compose(config_name=config_name, overrides=list(overrides), return_hydra_config=True)


def compose_train_config(overrides: Sequence[str] = ()) -> DictConfig:
    """`conf/train.yaml` with command-line style overrides, ready for `src.train.train`.

    Hydra's runtime (config choices, `${hydra:...}`) is set as for a single run; pass
    `paths.run_dir=...` to choose the run folder, since no Hydra job creates one here.
    """
    cfg = compose_config(overrides)
    HydraConfig.instance().set_config(cfg)
    with open_dict(cfg):
        del cfg["hydra"]
    return cfg
