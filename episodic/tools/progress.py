"""Terminal output for long command-line work: a progress bar that shows only on a terminal
(never in a pipe, a file or CI, so logs and scripts stay clean), and lines written only when the
stream can take them at once (a runner whose stdout nobody reads never stalls on a full pipe)."""
from __future__ import annotations

import io
import os
import select
import sys
from typing import IO, TYPE_CHECKING, TextIO

if TYPE_CHECKING:
    from click._termui_impl import ProgressBar  # the type click.progressbar returns

FALSE_WORDS = ("", "0", "false", "no", "off")


def on_terminal(stream: IO[str] | None = None) -> bool:
    """Whether ``stream`` (default: stderr) is a terminal and the environment is not CI (the
    CI variable set to anything but 0/false/no/off, as CI services set it)."""
    stream = sys.stderr if stream is None else stream
    if os.environ.get("CI", "").strip().lower() not in FALSE_WORDS:
        return False
    try:
        return stream.isatty()
    except (AttributeError, ValueError):  # no isatty, or a closed stream
        return False


class Progress:
    """A progress bar (click's) on stderr that shows only :func:`on_terminal`; otherwise every
    call does nothing. Call it with (done, total) after each piece of work, e.g. as the
    ``progress`` callback of :func:`episodic.tools.replay.replay`; use it in a ``with`` block so the
    bar ends with its line finished. ``label``: what is being done ("replaying")."""

    def __init__(self, label: str, stream: TextIO | None = None, shown: bool | None = None):
        self.label = label
        self.stream = sys.stderr if stream is None else stream
        self.shown = on_terminal(self.stream) if shown is None else shown
        self._bar: ProgressBar[int] | None = None
        self._done = 0

    def __call__(self, done: int, total: int) -> None:
        if not self.shown:
            return
        if self._bar is None:
            import click

            self._bar = click.progressbar(length=total, label=self.label, file=self.stream, show_pos=True)
            self._bar.__enter__()
        self._bar.update(done - self._done)
        self._done = done

    def close(self) -> None:
        """Finish the bar's line (nothing when no bar was shown)."""
        if self._bar is not None:
            self._bar.__exit__(None, None, None)
            self._bar = None

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class Lines:
    """Writes lines to ``stream`` (default: stdout) only when that cannot block: a pipe that
    nobody reads fills up, and a process writing to it would stop until somebody does (a runner
    serving its learner must not). A line that would block is dropped and counted; the next one
    written says how many were. Streams without a file descriptor (e.g. a test's capture) are
    written to directly."""

    def __init__(self, stream: IO[str] | None = None):
        self.stream = stream
        self.dropped = 0

    def __call__(self, text: str) -> bool:
        """Write ``text`` and a newline unless that would block; whether it was written."""
        stream = sys.stdout if self.stream is None else self.stream
        if not _writable(stream):
            self.dropped += 1
            return False
        if self.dropped:
            text = f"({self.dropped} line{'s' if self.dropped != 1 else ''} not shown: the output was not read)\n{text}"
        try:
            stream.write(text + "\n")
            stream.flush()
        except (OSError, ValueError):  # a closed pipe or stream: nobody is reading any more
            self.dropped += 1
            return False
        self.dropped = 0
        return True


def _writable(stream: IO[str]) -> bool:
    """Whether a short write to ``stream`` goes through at once (true for files and terminals;
    for a pipe, whether it has room)."""
    try:
        fd = stream.fileno()
    except (AttributeError, OSError, ValueError, io.UnsupportedOperation):
        return True
    try:
        return bool(select.select([], [fd], [], 0)[1])
    except (OSError, ValueError):
        return False
