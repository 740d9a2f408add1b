"""The timing record of a paced run (non-blocking / real-time mode): the histogram of period
errors a pacer keeps, a mark of it at some moment, and the tick statistics between two marks
that an episode's log records."""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

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


def bin_index(error: float) -> int:
    """The histogram bin (0 to N_BINS - 1) that counts a period error of ``error`` s (>= 0)."""
    return min(0 if error < ERROR_FLOOR else 1 + int(math.log(error / ERROR_FLOOR) / _LOG_STEP), N_BINS - 1)


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


def quantiles(counts: np.ndarray, qs: tuple[float, ...]) -> list[float]:
    """The period errors s at the quantiles ``qs`` (0 to 1; 1 the maximum) of the histogram
    ``counts`` (N_BINS,), each the value of the bin holding that rank; 0 when it is empty."""
    total = int(counts.sum())
    if total == 0:
        return [0.0] * len(qs)
    cumulative = np.cumsum(counts)
    return [float(BIN_VALUES[np.searchsorted(cumulative, q * (total - 1), side="right")]) for q in qs]
