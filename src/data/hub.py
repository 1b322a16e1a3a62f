"""Rows from a Hugging Face hub dataset, or from the sample file we ship when the hub is out of reach.

The sample files under `src/data/samples/` are synthetic questions in the real schemas,
written for tests and the offline demo; a run that falls back to one says so in its log and in
its MLflow tags (`data_source`).
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from src.data.files import read_rows
from src.utils.errors import MissingFileError
from src.utils.hub import hub_reachable

log = logging.getLogger(__name__)
SAMPLES_DIR = Path(__file__).parent / "samples"


def sample_path(name: str) -> Path:
    """A shipped sample file by name (`medmcqa_sample.jsonl`), or a path as given."""
    path = Path(name)
    return path if path.is_absolute() or path.exists() else SAMPLES_DIR / name


def hub_splits(
    hub_id: str,
    splits: dict[str, str],
    sample: str | None = None,
    config_name: str | None = None,
) -> dict[str, Any]:
    """{"train": rows, "validation": rows, "source": where they came from}.

    `splits` maps our split names to the hub's (`{train: train, validation: validation}`).
    Without the hub, `sample` (a shipped sample file) is returned whole under "all" for the data
    module to split; without either, the error says how to give a local file.
    """
    if hub_reachable():
        try:
            import datasets
        except ImportError as error:
            raise ImportError(
                "loading a hub dataset needs the `datasets` package: pip install datasets"
            ) from error
        loaded = {
            ours: datasets.load_dataset(hub_id, config_name, split=theirs).to_list()
            for ours, theirs in splits.items()
        }
        return {**loaded, "source": f"hub:{hub_id}"}
    if sample is None:
        raise MissingFileError(
            f"the hub dataset {hub_id!r} cannot be reached and no sample file is configured; "
            "give a local file with data.path=FILE (JSON, JSONL or Parquet)"
        )
    path = sample_path(sample)
    log.warning(
        "Hub dataset %s unreachable: using the shipped SYNTHETIC sample %s "
        "(give real data with data.path=FILE)",
        hub_id,
        path,
    )
    rows = read_rows(path)
    for row in rows:
        row["_file"] = str(path)
    return {"all": rows, "source": f"sample:{path.name}"}
