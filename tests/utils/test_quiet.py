"""What a run prints is ours: Lightning's cloud-logger tip and torch's LeafSpec deprecation
line are left out, and nothing else is."""

from __future__ import annotations

import logging
import warnings

import lightning as L
import pytest

from src.utils.quiet import _FILTER, LIGHTNING_LOGGERS, quiet_foreign_lines


def tip_lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if "litlogger" in r.getMessage()]


def test_lightnings_tip_is_left_out_and_its_other_lines_are_not(caplog):
    for name in LIGHTNING_LOGGERS:
        logging.getLogger(name).removeFilter(_FILTER)
    with caplog.at_level(logging.INFO):
        L.Trainer(logger=False, enable_progress_bar=False, enable_model_summary=False)
    assert tip_lines(caplog)  # what a run printed before
    caplog.clear()
    quiet_foreign_lines()
    quiet_foreign_lines()  # twice adds nothing twice
    with caplog.at_level(logging.INFO):
        L.Trainer(logger=False, enable_progress_bar=False, enable_model_summary=False)
    assert not tip_lines(caplog)
    assert any("GPU available" in r.getMessage() for r in caplog.records)  # the rest stays


def test_the_leafspec_deprecation_is_left_out():
    from torch.utils._pytree import LeafSpec

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        LeafSpec()
        assert any("LeafSpec" in str(w.message) for w in caught)
        caught.clear()
        quiet_foreign_lines()
        LeafSpec()
        warnings.warn("a warning of ours", UserWarning, stacklevel=1)
    assert [str(w.message) for w in caught] == ["a warning of ours"]


def test_runs_print_no_model_table(make_cfg):
    assert make_cfg(tiny=False).trainer.enable_model_summary is False
