"""How the C allocator treats freed memory: kept for reuse instead of returned to the system.

A training step allocates and frees the same large tensors (activations, their gradients) every
time. By default glibc serves blocks from 128 KiB up (a threshold it raises as it goes) with
fresh `mmap`s and gives the top of its heap back once it is free, so each step pays a page
fault and the kernel's zeroing for every page of those tensors again. Kept memory is reused
instead, as the allocators of CPU training launchers (jemalloc, tcmalloc) do. The process's
peak is unchanged: memory is kept, not added.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging
import platform

log = logging.getLogger(__name__)

M_TRIM_THRESHOLD = -1  # mallopt parameters, from glibc's malloc.h
M_MMAP_THRESHOLD = -3
MMAP_THRESHOLD = 32 * 2**20  # the largest glibc accepts on 64-bit systems
TRIM_THRESHOLD = 2**31 - 1  # mallopt takes an int: the heap shrinks only past 2 GiB free at its top


def keep_freed_memory() -> bool:
    """Have glibc serve blocks under 32 MiB from its heap and keep the heap's free top, so
    freed memory is reused without page faults. Returns whether both settings took; False,
    and nothing changed, where the C library is not glibc (macOS, musl)."""
    if platform.system() != "Linux" or platform.libc_ver()[0] != "glibc":
        return False
    name = ctypes.util.find_library("c") or "libc.so.6"
    try:
        mallopt = ctypes.CDLL(name).mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    done = mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD) == 1
    done = mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD) == 1 and done
    if not done:
        log.warning("glibc refused the allocator settings; freed memory goes back to the system")
    return done
