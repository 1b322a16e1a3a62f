"""Whether the Hugging Face hub can be reached, decided in milliseconds rather than retries.

Offline, transformers and datasets retry a hub name for the better part of a minute before
failing; asking once here lets loaders go straight to their packaged fallback.
"""

from __future__ import annotations

import functools
import logging
import os
import socket
from urllib.parse import urlparse

log = logging.getLogger(__name__)
TRUTHY = {"1", "true", "yes", "on"}


def hub_offline_requested() -> bool:
    """True when the user has switched the hub off (HF_HUB_OFFLINE or HF_DATASETS_OFFLINE)."""
    return any(
        os.environ.get(name, "").strip().lower() in TRUTHY
        for name in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_DATASETS_OFFLINE")
    )


@functools.lru_cache(maxsize=1)
def hub_reachable(timeout: float = 3.0) -> bool:
    """True when a TCP connection to the hub endpoint opens within `timeout` seconds."""
    if hub_offline_requested():
        return False
    endpoint = urlparse(os.environ.get("HF_ENDPOINT", "https://huggingface.co"))
    port = endpoint.port or (443 if endpoint.scheme == "https" else 80)
    try:
        with socket.create_connection((endpoint.hostname, port), timeout=timeout):
            return True
    except OSError as error:
        log.info("Hugging Face hub %s unreachable: %s", endpoint.hostname, error)
        return False
