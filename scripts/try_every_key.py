"""Set every user-facing key of every task to values of the wrong type, out of range, empty and
null, and count what the settings check accepts and refuses (in process, one composed config per
task). Prints the table of docs/reliability.md:

    .venv/bin/python scripts/try_every_key.py
"""

from __future__ import annotations

import logging
import sys
import tempfile
from collections import Counter
from pathlib import Path

from omegaconf import DictConfig, OmegaConf

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from src.runs.schema import setting_of  # noqa: E402
from src.runs.settings import check_settings  # noqa: E402
from src.utils.compose import compose_train_config  # noqa: E402
from src.utils.errors import UserError  # noqa: E402

TASKS = sorted(path.stem for path in (ROOT / "conf" / "task").glob("*.yaml"))
BAD_VALUES = ["abc", 1.5, -1, "", None]
SKIPPED_GROUPS = ("hydra", "stages", "pipeline")  # Hydra's own, and the stages a pipeline runs


def leaves(node: DictConfig, prefix: str = "") -> list[str]:
    """The dotted keys of every scalar the user sets (not what builds objects: `_target_` and
    `_partial_`; not lists)."""
    found = []
    for key in node:
        path = f"{prefix}{key}"
        if str(key).startswith("_") or (not prefix and key in SKIPPED_GROUPS):
            continue
        child = node._get_node(key)
        if OmegaConf.is_dict(child) and not child._is_none():
            found += leaves(node[key], path + ".")
        elif not OmegaConf.is_list(child):
            found.append(path)
    return found


def verdict(raw: dict, key: str, value: object) -> str:
    """`accepted`, or `refused` (a `UserError` of one line); anything else raises."""
    return trial(OmegaConf.create(raw), key, value, original=None)


def trial(cfg: DictConfig, key: str, value: object, original: object) -> str:
    """`verdict` with `key` set to `value` in `cfg` itself, and set back to `original` after
    (the walk builds one config per task, not one per value)."""
    OmegaConf.update(cfg, key, value, merge=False)
    try:
        check_settings(cfg)
    except UserError as error:
        if "\n" in str(error):
            raise AssertionError(f"{key}={value!r}: a message of several lines: {error}") from None
        return "refused"
    finally:
        OmegaConf.update(cfg, key, original, merge=False)
    return "accepted"


def task_config(task: str, folder: Path) -> DictConfig:
    return compose_train_config(
        [f"task={task}", f"paths.output_root={folder}", f"paths.run_dir={folder / 'run'}"]
    )


def trials(cfg: DictConfig, keys: list[str] | None = None) -> dict[str, Counter[str]]:
    """key -> how many of `BAD_VALUES` were accepted and refused, for each of `keys` (default:
    every leaf of `cfg`)."""
    raw = OmegaConf.to_container(cfg, resolve=False)
    walked = OmegaConf.create(raw)  # each key is set back after its values
    return {
        key: Counter(trial(walked, key, value, raw_value(raw, key)) for value in BAD_VALUES)
        for key in (leaves(cfg) if keys is None else keys)
    }


def raw_value(raw: dict, key: str) -> object:
    """The value at a dotted key of the unresolved config (an interpolation as its text)."""
    node: object = raw
    for part in key.split("."):
        node = node[part]  # type: ignore[index]
    return node


def main() -> None:
    # the warnings a value draws (a high kl_beta) are not the table
    logging.disable(logging.WARNING)
    print(f"values tried per key: {', '.join(repr(v) for v in BAD_VALUES)}\n")
    print("| task | keys | typed keys | values tried | accepted | refused |")
    print("|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as folder:
        for task in TASKS:
            found = trials(task_config(task, Path(folder)))
            typed = sum(setting_of(key) is not None or key.startswith("algo.") for key in found)
            accepted = sum(counts["accepted"] for counts in found.values())
            refused = sum(counts["refused"] for counts in found.values())
            print(
                f"| {task} | {len(found)} | {typed} | {accepted + refused} | {accepted} | "
                f"{refused} |"
            )


if __name__ == "__main__":
    main()
