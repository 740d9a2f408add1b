"""Wall-clock pacing of the control loop (non-blocking / real-time mode); its timing record is
episodic.logs.timing."""
from __future__ import annotations

import time

import numpy as np

from episodic.logs.timing import N_BINS, Mark, Timing, bin_index

SPIN = 0.0005  # s before a tick's start when sleeping gives way to spinning (sleep overshoots)


class Pacer:
    """Starts each control step at t0 + k·dt of the wall clock. A late tick is counted as a
    missed deadline and the schedule restarts from it (no burst of catch-up ticks). The record
    of the ticks is of fixed size: counts of ticks and missed deadlines, and a histogram of the
    period errors (episodic.logs.timing.ERROR_RESOLUTION)."""

    def __init__(self, dt: float):
        self.dt = dt
        self._next: float | None = None
        self._last: float | None = None  # perf_counter() s at the start of the last tick
        self._ticks = 0
        self._missed = 0
        self._counts = np.zeros(N_BINS, dtype=np.int64)  # period errors per histogram bin

    def wait(self) -> tuple[float, bool]:
        """Block until the next tick is due (call at the start of every control step); returns
        when the tick started (perf_counter s) and whether it was late."""
        now = time.perf_counter()
        late = self._next is not None and now > self._next
        if self._next is None or late:
            self._next = now
        else:
            if self._next - now > SPIN:
                time.sleep(self._next - now - SPIN)
            while time.perf_counter() < self._next:
                pass
        start = time.perf_counter()
        self.record(start, late)
        self._next += self.dt
        return start, late

    def record(self, start: float, late: bool) -> None:
        """Note a tick that started at ``start`` (perf_counter s), late or not (for clocks kept
        elsewhere, e.g. by a robot driver)."""
        if self._last is not None:
            error = abs(start - self._last - self.dt)
            self._counts[bin_index(error)] += 1
        self._last = start
        self._ticks += 1
        self._missed += late

    def time_left(self) -> float:
        """Seconds until the next tick is due (from the start of the last one; 0 before the
        first tick or when it is already late)."""
        if self._last is None:
            return 0.0
        return max(0.0, self._last + self.dt - time.perf_counter())

    def mark(self) -> Mark:
        """The tick record now, for ``timing(since=...)`` and ``Timing.between`` (a copy of the
        histogram: a few us, where the statistics take tens)."""
        return Mark(self._ticks, self._missed, self._counts.copy())

    def timing(self, since: Mark | None = None) -> Timing:
        """Statistics of the ticks since the mark ``since`` (of the whole run when None)."""
        return Timing.between(since, Mark(self._ticks, self._missed, self._counts))
