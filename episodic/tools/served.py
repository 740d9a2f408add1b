"""A served runner in a subprocess: ``python -m episodic serve`` started, waited for and stopped.

Used by the demo, the examples, the benchmarks and the tests::

    with ServedRunner(fresh_channel("demo"), task="ball_in_cup", log="runs/demo.h5", seed=0) as runner:
        with Client(runner.channel) as client:
            ...
        runner.stop(check=True)

Entering the ``with`` block waits for the runner's "serving" line (``ServeError`` with the
runner's stderr if it exits or stays silent first). Leaving it, also after an error or
Ctrl-C, stops the runner (SIGTERM, then SIGKILL) and removes whatever shared memory its
channel left behind. The runner's stderr goes to a temporary file unless the caller asks for
a pipe, so a long run never blocks on a full pipe.
"""
from __future__ import annotations

import contextlib
import itertools
import os
import select
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import IO

from episodic.bridge.channel import remove, runner_pid_of

READY_TIMEOUT = 60.0  # s to wait for the runner's "serving" line
STOP_TIMEOUT = 30.0   # s to wait for the runner to exit after a signal, before SIGKILL
_channels = itertools.count()


class ServeError(RuntimeError):
    """A served runner did not start, failed while serving, exited with an error, or does not
    serve what its learner needs."""


def fresh_channel(prefix: str) -> str:
    """A channel name no other call in any process makes: ``<prefix><pid>-<n>``."""
    return f"{prefix}{os.getpid()}-{next(_channels)}"


class ServedRunner:
    """``python -m episodic serve`` in a subprocess, started on construction.

    ``task``, ``params`` (task parameters, NAME -> value), ``log`` (HDF5 file, resolved against
    this process's working directory), ``seed`` and ``mode`` ("blocking" or "realtime") become
    the matching ``serve`` options, and so does ``priority`` (SCHED_FIFO priority of a realtime
    runner, 1..99); None leaves ``serve``'s default. ``args`` are further
    ``serve`` options as they would be typed (e.g. ``("--learner-timeout", "1")``). ``cores``:
    CPU cores the runner is pinned to (default: not pinned). ``stderr``: None for a private
    temporary file (read with ``stderr_text``), or ``subprocess.PIPE`` to read ``proc.stderr``.
    """

    def __init__(self, channel: str, *, task: str | None = None, params: Mapping[str, object] | None = None,
                 log: str | Path | None = None, seed: int | None = None, mode: str | None = None,
                 priority: int | None = None, args: Sequence[str] = (), cores: Iterable[int] | None = None,
                 stderr: int | None = None):
        self.channel = channel
        self.banner = ""
        cmd = [sys.executable, "-m", "episodic", "serve", "--channel", channel]
        options = {"--task": task, "--log": None if log is None else Path(log).resolve(), "--seed": seed,
                   "--mode": mode, "--priority": priority}
        cmd += [str(part) for option, value in options.items() if value is not None for part in (option, value)]
        cmd += [part for name, value in (params or {}).items() for part in ("--param", f"{name}={value}")]
        cmd += list(args)
        self._stderr_file: IO[str] | None = tempfile.TemporaryFile(mode="w+") if stderr is None else None
        pinned = None if cores is None else set(cores)
        self.proc = subprocess.Popen(
            cmd, stdout=subprocess.PIPE, stderr=self._stderr_file if stderr is None else stderr, text=True,
            preexec_fn=None if pinned is None else lambda: os.sched_setaffinity(0, pinned))

    @property
    def ready(self) -> bool:
        """Whether the runner has printed its "serving" line."""
        return "serving" in self.banner

    def read_banner(self, timeout: float = READY_TIMEOUT) -> str:
        """Read the runner's stdout until its "serving" line, its exit or ``timeout`` s,
        whichever comes first; the text read (also kept in ``banner``)."""
        deadline = time.monotonic() + timeout
        stdout = self.proc.stdout
        assert stdout is not None  # opened as a pipe in __init__
        while not self.ready:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([stdout], [], [], left)[0]:
                break
            line = stdout.readline()
            if not line:  # stdout closed: the runner is exiting
                with contextlib.suppress(subprocess.TimeoutExpired):
                    self.proc.wait(timeout=max(deadline - time.monotonic(), 0.0))
                break
            self.banner += line
        return self.banner

    def wait_ready(self, timeout: float = READY_TIMEOUT) -> str:
        """The runner's "serving" line; ServeError (with its stderr) if it exits or prints no
        such line within ``timeout`` s."""
        self.read_banner(timeout)
        if self.ready:
            return self.banner.strip()
        if self.proc.poll() is None:
            raise self.failed(f"the runner on channel '{self.channel}' printed no 'serving' line within {timeout} s")
        raise self.failed(f"the runner on channel '{self.channel}' exited (code {self.proc.returncode}) "
                          f"before serving")

    def stderr_text(self) -> str:
        """What the runner wrote to stderr so far (from a pipe: only once it has exited)."""
        if self._stderr_file is not None:
            self._stderr_file.seek(0)
            return self._stderr_file.read()
        if self.proc.stderr is not None and self.proc.poll() is not None:
            return self.proc.stderr.read()
        return ""

    def stop(self, sig: int = signal.SIGTERM, timeout: float = STOP_TIMEOUT, check: bool = False) -> int:
        """Send ``sig`` (if the runner still runs) and wait for its exit, with SIGKILL after
        ``timeout`` s; its exit code. ``check``: ServeError (with its stderr) unless it is 0."""
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if check and self.proc.returncode != 0:
            raise self.failed(f"the runner on channel '{self.channel}' exited with code {self.proc.returncode}")
        return self.proc.returncode

    def failed(self, reason: object) -> ServeError:
        """Stop the runner; a ServeError of ``reason`` (e.g. the learner's exception) followed by
        what the runner wrote to stderr, for the caller to raise."""
        self.stop()
        return ServeError(f"{reason}\n{self.stderr_text().strip()}".strip())

    def close(self) -> None:
        """Stop the runner and remove its channel's shared memory unless a live runner (another
        one) serves it; close the pipes and the stderr file."""
        try:
            self.stop()
        finally:
            if runner_pid_of(self.channel) is None:  # no live runner holds it (the lock says so, not a pid)
                remove(self.channel)  # nothing left if the runner cleaned up; its leftovers if not
            for stream in (self.proc.stdout, self.proc.stderr, self._stderr_file):
                if stream is not None:
                    stream.close()

    def __enter__(self) -> ServedRunner:
        try:
            self.wait_ready()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc) -> None:
        self.close()
