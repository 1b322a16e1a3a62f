"""What a run prints is ours: lines other packages print on every run that say nothing about
the run are left out, through the logging and warnings filters those packages log by.

- Lightning's tip advertising its cloud logger, logged at every `Trainer` start.
- torch's FutureWarning about `isinstance(treespec, LeafSpec)`, which Lightning's own code
  triggers (nothing a user can change).
"""

from __future__ import annotations

import logging
import warnings

# Lightning logs its rank-zero messages through these loggers (fabric's, and pytorch's alias)
LIGHTNING_LOGGERS = (
    "lightning.fabric.utilities.rank_zero",
    "lightning.pytorch.utilities.rank_zero",
)
FOREIGN_PHRASES = ("litlogger",)  # a record containing one of these is not printed
LEAF_SPEC = r".*isinstance\(treespec, LeafSpec\).*"


class ForeignLines(logging.Filter):
    """Drops the records that contain one of `FOREIGN_PHRASES`."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        return not any(phrase in message for phrase in FOREIGN_PHRASES)


_FILTER = ForeignLines()


def quiet_foreign_lines() -> None:
    """Leave other packages' boilerplate out of a run's output (idempotent)."""
    for name in LIGHTNING_LOGGERS:
        logging.getLogger(name).addFilter(_FILTER)  # added once: addFilter skips a duplicate
    # at the front of the filters; the warnings module drops an identical earlier entry
    warnings.filterwarnings("ignore", message=LEAF_SPEC, category=FutureWarning)
