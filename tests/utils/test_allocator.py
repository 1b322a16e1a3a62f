"""Kept freed memory: a block freed and allocated again costs no page faults."""

import platform
import subprocess
import sys

import pytest

# Allocates, frees and allocates again an 8 MiB zeroed block, and prints the page faults of
# the second allocation (2048 pages when it comes fresh from the system).
PROBE = """
import resource, sys
from src.utils.allocator import keep_freed_memory
if sys.argv[1] == "keep":
    assert keep_freed_memory()
block = bytearray(8 * 2**20)
del block
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
block = bytearray(8 * 2**20)
print(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
"""


def faults(mode: str) -> int:
    done = subprocess.run(
        [sys.executable, "-c", PROBE, mode], capture_output=True, text=True, check=True
    )
    return int(done.stdout.strip())


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="mallopt is glibc's")
def test_kept_memory_comes_back_without_page_faults():
    assert faults("default") >= 1000  # glibc's default: a fresh mmap, every page faulted in
    assert faults("keep") < 100


def test_the_setting_is_on_by_default_and_can_be_turned_off(make_cfg, monkeypatch):
    from src.runs import parts

    calls = []
    monkeypatch.setattr(parts, "keep_freed_memory", lambda: calls.append(1) or True)
    parts.build_run_parts(make_cfg())
    parts.build_run_parts(make_cfg("keep_freed_memory=false"))
    assert calls == [1]
