"""notebooks/compare_runs.ipynb: stored without outputs, and it runs against a real sweep."""

from __future__ import annotations

import base64
import struct

import nbformat
import pytest
from nbclient import NotebookClient

from src.utils.resolvers import PROJECT_ROOT

NOTEBOOK = PROJECT_ROOT / "notebooks" / "compare_runs.ipynb"


def test_notebook_is_stored_without_outputs():
    notebook = nbformat.read(NOTEBOOK, as_version=4)
    code = [cell for cell in notebook.cells if cell.cell_type == "code"]
    assert code, "the notebook has no code"
    for cell in code:
        assert cell.outputs == [] and cell.execution_count is None, (
            "strip outputs before committing: .venv/bin/nbstripout notebooks/compare_runs.ipynb"
        )


@pytest.mark.slow
@pytest.mark.xdist_group("six_job_sweep")  # one worker of `pytest -n N` makes the sweep
def test_notebook_plots_and_tabulates_the_sweep(six_job_sweep, tmp_path, monkeypatch):
    monkeypatch.setenv("EXPERIMENT", "arithmetic")
    monkeypatch.setenv("MLFLOW_TRACKING_URI", six_job_sweep.tracking_uri)
    monkeypatch.delenv("SWEEP_ID", raising=False)
    notebook = nbformat.read(NOTEBOOK, as_version=4)
    NotebookClient(
        notebook, timeout=300, resources={"metadata": {"path": str(NOTEBOOK.parent)}}
    ).execute()  # raises CellExecutionError, with the cell and its traceback, if any cell fails
    outputs = [output for cell in notebook.cells for output in cell.get("outputs", [])]

    pngs = [
        base64.b64decode(o["data"]["image/png"])
        for o in outputs
        if "image/png" in o.get("data", {})
    ]
    # reward and eval/accuracy against step; the intervals over seeds; the performance profile
    assert len(pngs) == 3
    png = pngs[0]
    assert png.startswith(b"\x89PNG\r\n\x1a\n")
    width, height = struct.unpack(">II", png[16:24])
    assert width > 800 and height > 300
    (tmp_path / "compare_runs.png").write_bytes(png)  # to look at: pytest --basetemp=DIR

    texts = [o["data"]["text/plain"] for o in outputs if "text/plain" in o.get("data", {})]
    final = next(text for text in texts if "eval/accuracy" in text and "status" in text)
    assert final.count("FINISHED") == 6  # one row per job
    means = [
        text for text in texts if "jobs" in text and ("kl_beta" in text or "group_size" in text)
    ]
    assert len(means) == 2  # one table per swept key
    # six configurations of one run each: points, and no interval without a second seed
    intervals = next(text for text in texts if "IQM low" in text)
    assert "algo.kl_beta=0.1 algo.group_size=4 " in intervals and "NaN" in intervals
