"""Wall-clock pacing of the control loop (non-blocking / real-time mode) and its timing record."""
from __future__ import annotations

import math
import time
from dataclasses import dataclass

import numpy as np

SPIN = 0.0005  # s before a tick's start when sleeping gives way to spinning (sleep overshoots)
# The period errors are counted in a histogram of fixed size (a run of any length takes the same
# memory): bins ERROR_RESOLUTION wide relative to their value from ERROR_FLOOR s to ERROR_CEILING s,
# so the statistics are within ±ERROR_RESOLUTION / 2 of the exact ones.
ERROR_RESOLUTION = 0.01
ERROR_FLOOR = 1e-9     # s: a smaller period error counts as 0 (the clock's resolution)
ERROR_CEILING = 100.0  # s: a larger one counts as this
_LOG_STEP = math.log1p(ERROR_RESOLUTION)
N_BINS = 2 + math.ceil(math.log(ERROR_CEILING / ERROR_FLOOR) / _LOG_STEP)  # bin 0: below ERROR_FLOOR
# the period error s each bin stands for: 0, then the geometric centre of each bin
BIN_VALUES = np.concatenate([[0.0], ERROR_FLOOR * np.exp(_LOG_STEP * (np.arange(1, N_BINS) - 0.5))])


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

    @classmethod
    def between(cls, start: Mark | None, end: Mark) -> Timing:
        """Statistics of the ticks from the mark ``start`` (the first tick when None) to the mark
        ``end``: each tick's period runs from the start of the tick before it (the run's first
        tick has none)."""
        counts = end.counts if start is None else end.counts - start.counts
        before = (0, 0) if start is None else (start.ticks, start.missed)
        p50, p99, top = quantiles(counts, (0.5, 0.99, 1.0))
        return cls(end.ticks - before[0], p50, p99, top, end.missed - before[1])


@dataclass(frozen=True)
class Mark:
    """The tick record at some moment, for ``Pacer.timing(since=...)``: ticks and missed
    deadlines so far, and the counts of the period-error histogram (N_BINS,)."""

    ticks: int
    missed: int
    counts: np.ndarray


class Pacer:
    """Starts each control step at t0 + k·dt of the wall clock. A late tick is counted as a
    missed deadline and the schedule restarts from it (no burst of catch-up ticks). The record
    of the ticks is of fixed size: counts of ticks and missed deadlines, and a histogram of the
    period errors (see ERROR_RESOLUTION)."""

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
            k = 0 if error < ERROR_FLOOR else 1 + int(math.log(error / ERROR_FLOOR) / _LOG_STEP)
            self._counts[min(k, N_BINS - 1)] += 1
        self._last = start
        self._ticks += 1
        self._missed += late

    def mark(self) -> Mark:
        """The tick record now, for ``timing(since=...)`` and ``Timing.between`` (a copy of the
        histogram: a few us, where the statistics take tens)."""
        return Mark(self._ticks, self._missed, self._counts.copy())

    def timing(self, since: Mark | None = None) -> Timing:
        """Statistics of the ticks since the mark ``since`` (of the whole run when None)."""
        return Timing.between(since, Mark(self._ticks, self._missed, self._counts))


def quantiles(counts: np.ndarray, qs: tuple[float, ...]) -> list[float]:
    """The period errors s at the quantiles ``qs`` (0 to 1; 1 the maximum) of the histogram
    ``counts`` (N_BINS,), each the value of the bin holding that rank; 0 when it is empty."""
    total = int(counts.sum())
    if total == 0:
        return [0.0] * len(qs)
    cumulative = np.cumsum(counts)
    return [float(BIN_VALUES[np.searchsorted(cumulative, q * (total - 1), side="right")]) for q in qs]
