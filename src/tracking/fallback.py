"""An MLflow tracking server that goes away mid-run must not stop training. What the run
records while the server is unreachable (metrics, params, tags, tables, artifacts, the final
status) is written to a local fallback file instead, with a warning; every few minutes the
run tries the server again and copies the file over once it answers. When the run ends before
the server is back:

    python -m src.tracking.fallback RUN_FOLDER [--tracking-uri URI]

copies it over. Metrics keep their original steps and timestamps, so copying twice writes
nothing twice.
"""

from __future__ import annotations

import argparse
import json
import logging
import shutil
import time
from pathlib import Path
from typing import Any

import requests
from mlflow import MlflowClient
from mlflow.entities import Metric, Param, RunTag
from mlflow.exceptions import MlflowException, RestException

from src.utils.appending import append_lines

log = logging.getLogger(__name__)

CALLS = "calls.jsonl"  # one recorded client call per line
COPIED = "calls.copied.jsonl"  # the same, once copied over
RECORDED = frozenset(
    {
        "log_batch",
        "log_metric",
        "log_param",
        "set_tag",
        "delete_tag",
        "log_artifact",
        "log_dict",
        "log_text",
        "log_table",
        "set_terminated",
        "update_run",
    }
)  # the client calls that write to a run; reads still fail when the server is gone
ENTITIES = {cls.__name__: cls for cls in (Metric, Param, RunTag)}


def unreachable(error: BaseException) -> bool:
    """True when `error` says the server could not be reached or failed (a 5xx), rather
    than that the request was wrong (a 4xx, which is still raised)."""
    if isinstance(error, RestException):
        return error.get_http_status_code() >= 500
    if isinstance(error, MlflowException):
        message = str(error)
        return (
            "failed with exception" in message
            or "failed with timeout exception" in message
            or error.get_http_status_code() >= 500
        )
    return isinstance(error, requests.RequestException | ConnectionError | TimeoutError)


def encode(value: Any) -> Any:
    """JSON-able form of a client call's argument (MLflow entities become tagged dicts)."""
    if type(value).__name__ in ENTITIES:
        return {"__entity__": type(value).__name__, **dict(value)}
    if isinstance(value, dict):
        return {str(key): encode(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [encode(item) for item in value]
    if isinstance(value, Path):
        return str(value)
    return value


def decode(value: Any) -> Any:
    """Inverse of `encode`."""
    if isinstance(value, dict):
        if "__entity__" in value:
            fields = {key: item for key, item in value.items() if key != "__entity__"}
            return ENTITIES[value["__entity__"]](**fields)
        return {key: decode(item) for key, item in value.items()}
    if isinstance(value, list):
        return [decode(item) for item in value]
    return value


class FallbackClient:
    """An `MlflowClient` whose writes go to `folder/calls.jsonl` while the tracking server is
    unreachable; every `retry_after_s` seconds the next write tries the server again."""

    def __init__(
        self, client: MlflowClient, folder: str | Path, retry_after_s: float = 300.0
    ) -> None:
        self.client = client
        self.tracking_uri = str(client.tracking_uri)
        self.folder = Path(folder)
        self.retry_after_s = retry_after_s
        self.offline_since: float | None = None
        self.retry_at = 0.0
        self.recorded = 0  # calls written to the fallback file by this process

    def __getattr__(self, name: str) -> Any:
        method = getattr(self.client, name)
        if name not in RECORDED:
            return method
        return lambda *args, **kwargs: self.call(name, *args, **kwargs)

    def call(self, name: str, *args: Any, **kwargs: Any) -> Any:
        """Make a writing call on the server, or record it when the server is unreachable."""
        if self.offline_since is not None and time.monotonic() >= self.retry_at:
            self.flush()
        if self.offline_since is None:
            try:
                return getattr(self.client, name)(*args, **kwargs)
            except Exception as error:
                if not unreachable(error):
                    raise
                self.go_offline(error)
        self.record(name, args, kwargs)
        return None

    def go_offline(self, error: BaseException) -> None:
        self.offline_since = time.time()
        self.retry_at = time.monotonic() + self.retry_after_s
        log.warning(
            "MLflow tracking server %s unreachable (%s); training goes on, and what the run "
            "records goes to %s until the server answers again (tried every %g s)",
            self.tracking_uri,
            str(error).splitlines()[0][:300],
            self.folder / CALLS,
            self.retry_after_s,
        )

    def record(self, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        """Append one call; files the call points to are copied, as they may be temporary."""
        self.folder.mkdir(parents=True, exist_ok=True)
        if name == "log_artifact":
            args, kwargs = self.keep_file(*args, **kwargs)
        line = {
            "call": name,
            "args": encode(list(args)),
            "kwargs": encode(kwargs),
            "tracking_uri": self.tracking_uri,
        }
        append_lines(self.folder / CALLS, json.dumps(line) + "\n")
        self.recorded += 1

    def keep_file(
        self, run_id: str, local_path: str, artifact_path: str | None = None
    ) -> tuple[tuple[Any, ...], dict[str, Any]]:
        kept = self.folder / "files" / f"{self.recorded:06d}" / Path(local_path).name
        kept.parent.mkdir(parents=True, exist_ok=True)
        copy = shutil.copytree if Path(local_path).is_dir() else shutil.copy2
        copy(local_path, kept)
        return (run_id, str(kept), artifact_path), {}

    def flush(self) -> bool:
        """Copy the recorded calls over if the server answers; True when it did."""
        try:
            copied = replay(self.folder, client=self.client)
        except Exception as error:
            # Whatever went wrong, training goes on; the file stays for the copy command.
            if not unreachable(error):
                log.warning("Copying the MLflow fallback over failed: %s", error)
            self.retry_at = time.monotonic() + self.retry_after_s
            return False
        log.warning(
            "MLflow tracking server %s answers again: %d recorded calls copied over",
            self.tracking_uri,
            copied,
        )
        self.offline_since = None
        return True

    def close(self) -> None:
        """At the end of the run: a last try, else say how to copy the calls over later."""
        if self.offline_since is not None and not self.flush():
            log.warning(
                "MLflow tracking server %s still unreachable: %d calls of this run are in %s; "
                "copy them over once it is back with: python -m src.tracking.fallback %s",
                self.tracking_uri,
                self.recorded,
                self.folder / CALLS,
                self.folder,
            )


def calls_file(path: str | Path) -> Path:
    """The fallback file of a run folder, a fallback folder, or the file itself."""
    path = Path(path)
    for candidate in (path, path / CALLS, path / "mlflow_fallback" / CALLS):
        if candidate.is_file():
            return candidate
    raise FileNotFoundError(
        f"{path}: no MLflow fallback file ({CALLS}) there or in mlflow_fallback/"
    )


def readable_calls(source: Path) -> list[tuple[int, dict[str, Any]]]:
    """The recorded calls with their line numbers; a line that is not a whole call (the last
    line of a run stopped while writing it) is skipped with a warning."""
    calls = []
    for number, text in enumerate(source.read_text().splitlines(), 1):
        if not text.strip():
            continue
        try:
            call = json.loads(text)
        except json.JSONDecodeError:
            call = None
        if not isinstance(call, dict) or "call" not in call:
            log.warning("%s:%d: not a whole recorded call (cut short?); skipped", source, number)
            continue
        calls.append((number, call))
    return calls


def replay(
    path: str | Path, client: MlflowClient | None = None, tracking_uri: str | None = None
) -> int:
    """Make the recorded calls on the server (the one they were meant for unless
    `tracking_uri` or `client` says otherwise), then rename the file to calls.copied.jsonl.
    Returns how many calls were copied."""
    source = calls_file(path)
    lines = readable_calls(source)
    for number, line in lines:
        target = client or MlflowClient(tracking_uri or line["tracking_uri"])
        try:
            getattr(target, line["call"])(*decode(line["args"]), **decode(line["kwargs"]))
        except Exception as error:
            if unreachable(error):
                raise
            raise RuntimeError(f"{source}:{number}: {line['call']} failed: {error}") from error
    if source.name != COPIED:  # a copied file given again stays as it is
        append_lines(source.with_name(COPIED), source.read_text())
        source.unlink()
    return len(lines)


def main(argv: list[str] | None = None) -> None:
    """Command line: copy a run's recorded MLflow calls over to the tracking server."""
    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("path", help="run folder, its mlflow_fallback/ folder, or calls.jsonl")
    parser.add_argument("--tracking-uri", help="server to copy to (default: the one recorded)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    source = calls_file(args.path)
    count = replay(source, tracking_uri=args.tracking_uri)
    print(f"copied {count} recorded MLflow calls from {source}")


if __name__ == "__main__":
    main()
