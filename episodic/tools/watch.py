"""A run watched in the terminal as its episodes finish (``episodic watch LOG``): the episodes so
far and their rate, the returns (last, mean, best), the success rate over the last episodes, the
flags, the batches, and a learning curve drawn in text. It reads the log's /summary
(episodic.logs.read_summary) each time the file changes, so it works on a log a runner is
writing (a live log, episodic.logs.writer) as well as on a finished one.
"""
from __future__ import annotations

import os
import sys
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from episodic.interface.vocabulary import Flag
from episodic.logs import being_written, read_metadata, read_summary

BLOCKS = " ▁▂▃▄▅▆▇█"  # a column's top cell, in eighths
WINDOW = 100          # episodes of the success rate and the recent mean
CURVE_SIZE = (60, 8)  # the learning curve's columns and rows of text
RATE_SPAN = 10.0      # s over which a live view measures episodes/s


@dataclass(frozen=True)
class RunState:
    """What a log holds now. ``numbers``, ``returns``, ``success`` and ``flags`` (n,) are its
    whole episodes' in number order; ``partial`` is how many were not written whole; ``live`` whether a runner is
    writing it; ``started`` the run's start (the log's ``created``, s since the epoch, NaN when
    not recorded) and ``modified`` the file's last change (s since the epoch); ``batches`` the
    batch numbers of batched episodes and ``batch_positions`` their places in them."""

    task: str
    robot: str
    numbers: np.ndarray
    returns: np.ndarray
    success: np.ndarray
    flags: np.ndarray
    batches: np.ndarray
    batch_positions: np.ndarray
    partial: int
    live: bool
    started: float
    modified: float

    @property
    def episodes(self) -> int:
        return len(self.returns)


def read_state(path: str | Path) -> RunState:
    """The RunState of the log at ``path`` (ValueError for a file that is not a readable log)."""
    import datetime

    live = being_written(path)
    meta = read_metadata(path, count_episodes=False)
    rows, partial = read_summary(path)
    whole = rows[~np.isin([f"{int(n):06d}" for n in rows["number"]], list(partial))] if len(rows) else rows
    try:
        started = datetime.datetime.fromisoformat(str(meta.get("created"))).timestamp()
    except ValueError:
        started = float("nan")
    batched = whole["batch"] >= 0
    return RunState(task=str(meta.get("task", "?")), robot=str(meta.get("robot", "?")),
                    numbers=whole["number"].astype(int), returns=whole["return"].astype(float),
                    success=whole["success"].astype(bool),
                    flags=whole["flag"].astype(int), batches=whole["batch"][batched].astype(int),
                    batch_positions=whole["batch_position"][batched].astype(int), partial=len(partial),
                    live=live, started=started, modified=os.stat(path).st_mtime)


def curve(values: np.ndarray, width: int = CURVE_SIZE[0], height: int = CURVE_SIZE[1]) -> list[str]:
    """``values`` (n,) drawn as ``height`` lines of at most ``width`` columns of blocks, each
    column the mean of its share of the values (in order), with the top and bottom values
    labelled; [] for no value."""
    values = np.asarray(values, float)
    values = values[np.isfinite(values)]
    if not len(values):
        return []
    columns = np.array([part.mean() for part in np.array_split(values, min(width, len(values)))])
    low, high = float(columns.min()), float(columns.max())
    # the lowest column one eighth high, the highest full
    eighths = 1 + np.round((columns - low) / (high - low) * (8 * height - 1)) if high > low \
        else np.full(len(columns), 4 * height)
    labels = [f"{high:>10.4g} ", " " * 11, f"{low:>10.4g} "]
    lines = []
    for row in range(height - 1, -1, -1):
        cells = np.clip(eighths - 8 * row, 0, 8).astype(int)
        label = labels[0] if row == height - 1 else labels[2] if row == 0 else labels[1]
        lines.append(label + "│" + "".join(BLOCKS[c] for c in cells))
    lines.append(" " * 11 + "└" + "─" * len(columns))
    return lines


def describe(state: RunState, rate: float | None = None, window: int = WINDOW) -> str:
    """The text view of ``state``; ``rate`` episodes/s measured by a live view (None: the run's
    average, its episodes over the time from its start to the file's last change)."""
    n = state.episodes
    if rate is None:
        span = state.modified - state.started
        rate = n / span if n and span > 0 else float("nan")
    status = "live: a runner is writing it" if state.live else "not being written (the run has ended)"
    lines = [f"{state.task} on {state.robot}; {status}",
             f"episodes: {n}" + (f" (and {state.partial} not written whole)" if state.partial else "")
             + (f", {rate:.3g} episodes/s" if np.isfinite(rate) else "")]
    if n:
        recent = slice(max(n - window, 0), n)
        best = int(np.argmax(state.returns))
        lines += [f"return: last {state.returns[-1]:.5g}, mean {state.returns.mean():.5g} (last {min(n, window)}: "
                  f"{state.returns[recent].mean():.5g}), best {state.returns[best]:.5g} "
                  f"(episode {state.numbers[best]})",
                  f"success: {100 * state.success[recent].mean():.0f} % of the last {min(n, window)} episodes, "
                  f"{int(state.success.sum())} in all"]
        counts = Counter(Flag(f).name if f in Flag._value2member_map_ else str(f) for f in state.flags.tolist())
        lines.append("flags: " + ", ".join(f"{name} {count}" for name, count in counts.most_common()))
    if len(state.batches):
        last = int(state.batches[-1])
        in_last = state.batch_positions[state.batches == last]
        lines.append(f"batches: {len(np.unique(state.batches))}, the last (batch {last}) with {len(in_last)} "
                     f"episodes so far (positions up to {int(in_last.max())})")
    if n:
        lines += ["", "return per episode (each column the mean of its share of the episodes):", *curve(state.returns)]
    return "\n".join(lines)


def watch(path: str | Path, interval: float = 1.0, window: int = WINDOW,
          show: Callable[[str], None] | None = None, until: float | None = None) -> None:
    """Show the view of the log at ``path`` (``describe``) and again each time the file changes
    (looked at every ``interval`` s), until KeyboardInterrupt or ``until`` s have passed; on a
    terminal each view replaces the last. ``show`` prints a view (default: to stdout)."""
    def to_stdout(text: str) -> None:
        out = sys.stdout
        out.write(("\x1b[H\x1b[2J" if out.isatty() else "") + text + "\n")  # on a terminal: over the last
        out.flush()

    end = time.monotonic() + until if until is not None else float("inf")
    seen: tuple[float, int] | None = None
    counts: list[tuple[float, int]] = []  # (time.monotonic(), episodes) within RATE_SPAN
    try:
        while time.monotonic() < end:
            st = os.stat(path)
            if seen != (st.st_mtime, st.st_size):
                seen = (st.st_mtime, st.st_size)
                state = read_state(path)
                now = time.monotonic()
                counts = [c for c in counts if now - c[0] <= RATE_SPAN] + [(now, state.episodes)]
                span = counts[-1][0] - counts[0][0]
                rate = (counts[-1][1] - counts[0][1]) / span if span > 0 and state.live else None
                (show or to_stdout)(describe(state, rate, window))
            time.sleep(interval)
    except KeyboardInterrupt:
        pass
