"""An MLflow logger whose run stays RUNNING across the several trainers of one experiment."""

from __future__ import annotations

from lightning.pytorch.loggers import MLFlowLogger


class MLflowRunLogger(MLFlowLogger):
    """Lightning ends the MLflow run after every `fit` and `validate`; one experiment calls
    several of them (warm start, evaluation, GRPO), so only a failure ends the run early and
    `end_run` closes it when the experiment is done."""

    def finalize(self, status: str = "success") -> None:
        if status != "success":
            super().finalize(status)

    def end_run(self) -> None:
        """Mark the run FINISHED."""
        super().finalize("success")
