"""The MLflow logger's keys (`logger.mlflow.*`, conf/logger/). Each key's type, range and choices,
beside the code that reads it; `src.runs.schema` assembles every folder's table and checks a
composed config against them."""

from __future__ import annotations

from src.utils.setting import FLAG, OPTIONAL_TEXT, TEXT, AnyOf, Setting, number, whole

# key -> what it may hold; what each means is said beside it in its config
SETTINGS: dict[str, Setting | AnyOf] = {
    # tracking and checkpoints
    "logger.mlflow.experiment_name": TEXT,
    "logger.mlflow.retry_after_s": number(0),
    "logger.mlflow.http_retries": whole(0),
    "logger.mlflow.http_timeout_s": number(0, above=True),
    "logger.mlflow.run_name": OPTIONAL_TEXT,
    "logger.mlflow.log_model": FLAG,
}
