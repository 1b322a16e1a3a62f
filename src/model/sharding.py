"""`hardware=fsdp`: which modules FSDP shards as one unit. Each transformer block is one unit,
its weights gathered just before it runs and freed after, so no process ever holds the whole
model. The block classes differ per architecture (`LlamaDecoderLayer`, `Gemma2DecoderLayer`,
...); every Hugging Face model names its own in `_no_split_modules`, which is read at wrap
time, so one config serves every model."""

from __future__ import annotations

from collections.abc import Sequence

from torch import nn


def block_class_names(model: nn.Module) -> set[str]:
    """Class names of the transformer blocks of every Hugging Face model inside `model` (a
    LightningModule, a peft model, a bare `PreTrainedModel`): their `_no_split_modules`."""
    names: set[str] = set()
    for module in model.modules():
        names.update(getattr(module, "_no_split_modules", None) or ())
    return names


def block_classes(model: nn.Module) -> set[type[nn.Module]]:
    """The transformer block classes present in `model`, as Lightning's `auto_wrap_policy`
    (or `activation_checkpointing_policy`) accepts them when the model is already built."""
    names = block_class_names(model)
    return {type(module) for module in model.modules() if type(module).__name__ in names}


class TransformerBlockPolicy:
    """An FSDP `auto_wrap_policy`: every module whose class a Hugging Face model lists in its
    `_no_split_modules` becomes its own FSDP unit.

    FSDP asks the policy about a module (`recurse=True`) before its children, so the model
    that declares the block classes is always seen before its blocks. Holds only class names,
    so it pickles (process launchers and SLURM jobs send the strategy to other processes).
    """

    def __init__(self, block_names: Sequence[str] = ()) -> None:
        """`block_names`: classes wrapped besides those the models declare (for a network that
        is not a Hugging Face model)."""
        self.block_names: set[str] = set(block_names)

    def __call__(self, module: nn.Module, recurse: bool, nonwrapped_numel: int = 0) -> bool:
        """FSDP's policy call: descend into every module; wrap a module that is a block."""
        if recurse:
            self.block_names.update(getattr(module, "_no_split_modules", None) or ())
            return True
        return type(module).__name__ in self.block_names

    def __repr__(self) -> str:
        return f"TransformerBlockPolicy(block_names={sorted(self.block_names)})"
