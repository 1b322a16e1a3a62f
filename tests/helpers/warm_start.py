"""The shared warm start of the tiny model (`warm_tiny` in tests/conftest.py), trained in a
process of its own that the suite starts as soon as it knows a selected test needs it, so
that the minute it takes overlaps with the tests before that one.

    python -m tests.helpers.warm_start ROOT   # writes the model folder's path to ROOT/folder.txt
"""

from __future__ import annotations

import sys
from pathlib import Path

from hydra.core.global_hydra import GlobalHydra

from src.runs.parts import build_run_parts
from src.sft.warm_start import warm_start
from src.utils.compose import compose_train_config

FOLDER_FILE = "folder.txt"  # where the warm-started model's folder is written


def warm_tiny_folder(root: Path, models_dir: Path) -> str:
    """The embedded default's warm start of the tiny model (SFT until right on about a third
    of held-back sums), seeded as `python -m src.train` seeds it, written under `root`."""
    cfg = compose_train_config(
        [f"paths.output_root={root}", f"paths.models_dir={models_dir}", f"paths.run_dir={root}"]
    )
    GlobalHydra.instance().clear()
    parts = build_run_parts(cfg)
    return str(warm_start(cfg, parts.datamodule, parts.policy, parts.reward, parts.sampler, []))


if __name__ == "__main__":
    root = Path(sys.argv[1])
    folder = warm_tiny_folder(root, root / "models")
    (root / FOLDER_FILE).write_text(folder)
