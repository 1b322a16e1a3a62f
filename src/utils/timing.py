"""Where a step's time goes: named phases timed with `phase(name)` inside `phase_timer()`.

Phases nest; each is charged only its own time (a phase inside another is subtracted from the
outer one), so the phases of a step add up to at most its wall time. Outside a `phase_timer`
block `phase` costs nothing and records nothing, so code that is also used for evaluation can
time itself unconditionally.
"""

from __future__ import annotations

import contextlib
import contextvars
import time
from collections.abc import Iterator


class PhaseTimer:
    """Seconds per phase name, exclusive of the phases nested inside it."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}
        self._children: list[float] = []  # time spent in nested phases, one entry per open phase

    @contextlib.contextmanager
    def phase(self, name: str) -> Iterator[None]:
        """Charge the time inside the block, less that of nested phases, to `name`."""
        started = time.perf_counter()
        self._children.append(0.0)
        try:
            yield
        finally:
            elapsed = time.perf_counter() - started
            nested = self._children.pop()
            self.seconds[name] = self.seconds.get(name, 0.0) + elapsed - nested
            if self._children:
                self._children[-1] += elapsed

    def metrics(self, prefix: str = "timing/") -> dict[str, float]:
        """The phases as metrics, e.g. {"timing/sampling": 1.2}."""
        return {f"{prefix}{name}": seconds for name, seconds in self.seconds.items()}


_active: contextvars.ContextVar[PhaseTimer | None] = contextvars.ContextVar(
    "phase_timer", default=None
)


@contextlib.contextmanager
def phase_timer() -> Iterator[PhaseTimer]:
    """Collect the phases timed inside the block into a fresh `PhaseTimer`."""
    timer = PhaseTimer()
    token = _active.set(timer)
    try:
        yield timer
    finally:
        _active.reset(token)


@contextlib.contextmanager
def phase(name: str) -> Iterator[None]:
    """Time the block as phase `name` of the active `phase_timer`, if there is one."""
    timer = _active.get()
    if timer is None:
        yield
        return
    with timer.phase(name):
        yield
