"""The real MLflow server over a sweep's store: its REST API, and the run-comparison page
rendered by headless Chromium."""

from __future__ import annotations

import json
import shutil
import urllib.parse
import urllib.request
from collections.abc import Iterator

import pytest

from tests.helpers.mlflow_server import mlflow_server as serve

from .conftest import SIX_JOB_STEPS

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
# The flags a closed network needs: no background connections, no sandbox as root.
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]

# True once the comparison plot's width is the same in two animation frames in a row.
PLOT_WIDTH_SETTLED = """() => {
  const plot = document.querySelector('.js-plotly-plot');
  if (!plot) return false;
  const width = plot.getBoundingClientRect().width;
  const settled = window.__plotWidth === width;
  window.__plotWidth = width;
  return settled;
}"""


@pytest.fixture(scope="module")
def mlflow_server(six_job_sweep, tmp_path_factory) -> Iterator[str]:
    """`mlflow server` on a free localhost port over the sweep's store; yields its address."""
    log = tmp_path_factory.mktemp("server") / "server.log"
    artifacts = six_job_sweep.output_root / "mlartifacts"
    with serve(six_job_sweep.tracking_uri, artifacts, log) as address:
        yield address


def rest(address: str, path: str, body: dict | None = None) -> dict:
    """GET (no body) or POST (JSON body) on the MLflow REST API."""
    request = urllib.request.Request(
        f"{address}/api/2.0/mlflow/{path}",
        data=None if body is None else json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        return json.load(response)


def sweep_runs(address: str) -> tuple[str, dict, list[dict]]:
    """The experiment id, the parent run and the child runs of the one sweep, via REST."""
    experiment = rest(address, "experiments/get-by-name?experiment_name=arithmetic")["experiment"]
    experiment_id = experiment["experiment_id"]
    (parent,) = rest(
        address,
        "runs/search",
        {"experiment_ids": [experiment_id], "filter": "tags.sweep_role = 'parent'"},
    )["runs"]
    tags = {tag["key"]: tag["value"] for tag in parent["data"]["tags"]}
    children = rest(
        address,
        "runs/search",
        {
            "experiment_ids": [experiment_id],
            "filter": f"tags.sweep_id = '{tags['sweep_id']}' and tags.sweep_job != ''",
            "order_by": ["tags.sweep_job ASC"],
        },
    )["runs"]
    return experiment_id, parent, children


@pytest.mark.slow
@pytest.mark.xdist_group("six_job_sweep")  # one worker of `pytest -n N` makes the sweep
def test_rest_api_serves_the_sweep(mlflow_server):
    _, parent, children = sweep_runs(mlflow_server)
    assert parent["info"]["status"] == "FINISHED"
    assert len(children) == 6
    for child in children:
        tags = {tag["key"]: tag["value"] for tag in child["data"]["tags"]}
        assert child["info"]["status"] == "FINISHED"
        assert tags["mlflow.parentRunId"] == parent["info"]["run_id"]
        history = rest(
            mlflow_server, f"metrics/get-history?run_id={child['info']['run_id']}&metric_key=reward"
        )["metrics"]
        assert sorted(point["step"] for point in history) == SIX_JOB_STEPS
    # Filtering by a swept value, as the UI's search box does.
    experiment_id = children[0]["info"]["experiment_id"]
    filtered = rest(
        mlflow_server,
        "runs/search",
        {"experiment_ids": [experiment_id], "filter": "tags.`sweep.algo.group_size` = '4'"},
    )["runs"]
    assert len(filtered) == 3


@pytest.mark.slow
@pytest.mark.xdist_group("six_job_sweep")  # one worker of `pytest -n N` makes the sweep
def test_run_comparison_page_in_headless_chromium(mlflow_server, tmp_path):
    if CHROMIUM is None:
        pytest.skip(
            "Debian's chromium is not installed (`apt-get install chromium`; .ci/run does it)"
        )
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed")
    experiment_id, _, children = sweep_runs(mlflow_server)
    ids = [child["info"]["run_id"] for child in children]
    names = [child["info"]["run_name"] for child in children]
    query = urllib.parse.urlencode(
        {"runs": json.dumps(ids), "experiments": json.dumps([experiment_id])}
    )
    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1600, "height": 1000})
            page.goto(f"{mlflow_server}/#/compare-runs?{query}")
            page.get_by_text(f"Comparing {len(ids)} Runs").wait_for(timeout=60_000)
            page.get_by_text(names[-1]).first.wait_for(timeout=60_000)
            plot = page.locator(".js-plotly-plot").first  # the parallel-coordinates plot
            plot.wait_for(state="visible", timeout=60_000)
            close = page.get_by_role("button", name="Close", exact=True)
            if close.count():  # MLflow 3's assistant panel: closed to show more of the runs
                close.first.click()
            # The plot widens into the freed space; the picture waits until its width holds
            # still between two frames.
            page.wait_for_function(PLOT_WIDTH_SETTLED, polling="raf", timeout=60_000)
            plot_width = plot.bounding_box()["width"]
            text = page.inner_text("body")
            screenshot = tmp_path / "mlflow_compare_runs.png"  # to look at: pytest --basetemp=DIR
            page.screenshot(path=str(screenshot), animations="disabled")
        finally:
            browser.close()
    for name in names:
        assert " ".join(name.split()) in " ".join(text.split())
    assert "algo.kl_beta" in text and "algo.group_size" in text
    assert plot_width > 300  # the plot was drawn, at a size one can read
    assert screenshot.read_bytes().startswith(b"\x89PNG") and screenshot.stat().st_size > 20_000
