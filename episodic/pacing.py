"""Wall-clock pacing of the control loop (non-blocking / real-time mode) and its timing record."""
from __future__ import annotations

import time
from array import array
from dataclasses import dataclass

import numpy as np

SPIN = 0.0005  # s before a tick's start when sleeping gives way to spinning (sleep overshoots)


@dataclass(frozen=True)
class Timing:
    """Tick statistics over some span: period error (actual period - control period) s at the
    median, 99th percentile and maximum of |error|, ticks, and deadlines missed (a tick that
    started after its scheduled time because the previous one overran)."""

    ticks: int
    period_error_p50: float
    period_error_p99: float
    period_error_max: float
    missed: int

    def as_attrs(self) -> dict[str, float | int]:
        return {f"timing_{k}": v for k, v in self.__dict__.items()}


class Pacer:
    """Starts each control step at t0 + k·dt of the wall clock. A late tick is counted as a
    missed deadline and the schedule restarts from it (no burst of catch-up ticks)."""

    def __init__(self, dt: float):
        self.dt = dt
        self._next: float | None = None
        self._starts = array("d")  # perf_counter() at the start of every tick
        self._missed = array("q")  # indices of the ticks that started late

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
        if late:
            self._missed.append(len(self._starts))
        self._starts.append(start)

    def mark(self) -> int:
        """A position in the tick record, for ``timing(since=...)``."""
        return len(self._starts)

    def timing(self, since: int = 0) -> Timing:
        starts = np.frombuffer(self._starts, dtype=np.float64)[since:]
        error = np.abs(np.diff(starts) - self.dt) if starts.size > 1 else np.zeros(1)
        missed = int(np.count_nonzero(np.frombuffer(self._missed, dtype=np.int64) >= since))
        return Timing(int(starts.size), float(np.median(error)), float(np.percentile(error, 99)),
                      float(error.max()), missed)
