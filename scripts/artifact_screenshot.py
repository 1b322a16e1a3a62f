"""A picture of a run's artifact in the MLflow UI, as `make ui` serves it, taken by headless
Chromium: how the docs show what `python -m src.compare` logs to a sweep's parent run.

    python scripts/artifact_screenshot.py RUN_ID comparison/eval_accuracy_intervals.png \
        docs/figures/compare_artifacts.png

It starts `mlflow ui` over the project's store (`outputs/mlflow.db`, or `--store`) on a free
localhost port, opens the run's Artifacts tab at that file, waits for the image to show, saves
the page and stops the server. Needs Debian's chromium and playwright (the dev extra).
"""

from __future__ import annotations

import argparse
import contextlib
import shutil
from collections.abc import Iterator
from pathlib import Path

from mlflow import MlflowClient

from src.tracking.local_server import ServerDidNotStart, local_mlflow

ROOT = Path(__file__).resolve().parents[1]
STORE = f"sqlite:///{ROOT / 'outputs' / 'mlflow.db'}"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--no-first-run",
    "--disable-background-networking",
]


@contextlib.contextmanager
def mlflow_ui(store: str) -> Iterator[str]:
    """`mlflow ui` over `store` (as `make ui` runs it) until the block ends; yields its address."""
    try:
        with local_mlflow(["ui", "--backend-store-uri", store]) as address:
            yield address
    except ServerDidNotStart:
        raise SystemExit("error: mlflow ui did not start") from None


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("run_id", help="the run whose artifact is shown")
    parser.add_argument("artifact", help="the artifact's path in the run, e.g. comparison/x.png")
    parser.add_argument("output", type=Path, help="the PNG to write")
    parser.add_argument("--store", default=STORE, help="the MLflow store (default: the project's)")
    args = parser.parse_args()
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        raise SystemExit("error: no chromium: apt-get install chromium")
    from playwright.sync_api import sync_playwright

    experiment = MlflowClient(args.store).get_run(args.run_id).info.experiment_id
    with mlflow_ui(args.store) as address, sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1500, "height": 950})
            page.goto(
                f"{address}/#/experiments/{experiment}/runs/{args.run_id}/artifacts/{args.artifact}"
            )
            page.locator("img").last.wait_for(state="visible", timeout=60_000)
            close = page.get_by_role("button", name="Close", exact=True)
            if close.count():  # MLflow 3's assistant panel
                close.first.click()
            page.wait_for_timeout(1000)  # the image's layout settles (a picture, not a test)
            args.output.parent.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(args.output), animations="disabled")
        finally:
            browser.close()
    print(f"wrote {args.output}")


if __name__ == "__main__":
    main()
