"""Compiled log-prob forwards (`model.compile`): the network's forward through `torch.compile`.

What is left of a training or reference forward on the CPU, once its matrix products run at the
processor's rate, is a string of elementwise passes (norms, rotary embeddings, the gated MLP's
activation), each reading and writing tensors of the activations' size. Inductor fuses them,
so forwards and backwards take less time. The price is compiling: at the first step, and
again the first time a shape changes (the second graph has
dynamic sizes, so later lengths reuse it), and a C++ compiler on CPU machines. Sampling and
evaluation keep running the modules as they are.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from typing import Any

import torch
from torch import nn

from src.utils.errors import ConfigError

# the C++ compilers inductor's CPU backend looks for, besides $CXX
CPP_COMPILERS = ("g++", "clang++")


def compiled_forward(network: nn.Module) -> Callable[..., Any]:
    """`network.forward` through `torch.compile` (compiled at its first call), after checking
    that this machine can compile for where the network runs."""
    require_compiler(network)
    return torch.compile(network.forward)


def require_compiler(network: nn.Module) -> None:
    """Raise a one-line `ConfigError` when the network is on the CPU and no C++ compiler is
    installed: inductor would fail only at the first step, with a long trace."""
    on_cpu = all(p.device.type == "cpu" for p in network.parameters())
    if not on_cpu or torch.cuda.is_available():
        return  # GPU kernels come from triton, which ships with CUDA builds of torch
    candidates = [os.environ.get("CXX"), *CPP_COMPILERS]
    if not any(name and shutil.which(name) for name in candidates):
        raise ConfigError(
            "model.compile=true needs a C++ compiler for torch.compile on the CPU (g++ or "
            "clang++, or $CXX); install one (e.g. apt install g++) or set model.compile=false"
        )
