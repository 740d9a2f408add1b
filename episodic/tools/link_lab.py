"""A robot across a faulty network on one machine, for tests and benchmarks/network.py: an
`episodic robot-server` process, fault-injecting relays in front of it (episodic.tools.relay),
and reach episodes measured the same way on the robot through the link (`episodic serve --robot-at`)
and in the in-process realtime mode (a Runner in this process, its simulation paced).

    with RobotProcess() as robot, RelayProcess(robot.address, Faults(delay=0.005)) as relay:
        results = trials(3, tmp / "link.h5", relay.address)

The episode (``reach_episode``): the start, then a minimum-jerk move of MOVE_SECONDS s by
OFFSET rad on every joint, held HOLD_SECONDS s. Its tracking error is the RMS over the move's
steps and joints of q - q_d as the runner measured them (``Trial.tracking``).
"""
from __future__ import annotations

import contextlib
import json
import os
import select
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import numpy as np

from episodic.bridge import Client
from episodic.interface.sender import Sender
from episodic.interface.trajectory import min_jerk
from episodic.interface.vocabulary import Flag, MachineState
from episodic.logs import read_episodes, read_metadata
from episodic.runtime.link import (
    MAX_STATE_AGE,
    VERSION,
    Kind,
    LinkStats,
    address,
    datagram_dtype,
    decode,
    logged_links,
    rms,
)
from episodic.runtime.runner import Runner
from episodic.tasks import make_task
from episodic.tools.relay import Faults
from episodic.tools.served import ServedRunner, fresh_channel

READY_TIMEOUT = 60.0  # s to wait for a process's first line (as episodic.tools.served)
MOVE_SECONDS = 0.5    # s
HOLD_SECONDS = 0.1    # s
OFFSET = 0.15         # rad on every joint (stays well inside the WAM's range from the reach start)
DT = 0.002            # s: the WAM's control period (robots/wam/robot.toml [control] rate = 500 Hz)
N_DOFS = 7            # the WAM's joints
HELLO_PERIOD = 0.1    # s between a probe's HELLOs (a robot-server keeps a peer PEER_SECONDS = 1 s)


class _Process:
    """A subprocess whose first stdout line says where it listens (``ready``; started processes
    start up side by side); stopped on leaving ``with``."""

    def __init__(self, args: list[str], prefix: str, stdin: int | None = None):
        self.stderr = tempfile.TemporaryFile(mode="w+")
        self.proc = subprocess.Popen([sys.executable, *args], stdin=stdin, stdout=subprocess.PIPE, stderr=self.stderr,
                                     text=True, env={**os.environ, "PYTHONUNBUFFERED": "1"})
        self.prefix, self.address = prefix, ""

    def ready(self):
        """Wait for the first line (RuntimeError with the process's stderr when it does not come);
        then ``address`` is where it listens (HOST:PORT). Returns the process."""
        if not self.address:
            line = _first_line(self.proc, READY_TIMEOUT)
            if not line.startswith(self.prefix):
                self.stop()
                self.stderr.seek(0)
                raise RuntimeError(f"{' '.join(map(str, self.proc.args))} did not start: {line!r} {self.stderr.read()}")
            self.address = line.split(" ")[1 if self.prefix == "relay:" else 4].rstrip(",")
        return self

    def signal(self, sig: int) -> None:
        self.proc.send_signal(sig)

    def close(self) -> None:
        self.stop()

    def stop(self) -> str:
        """SIGTERM, then SIGKILL after 5 s; returns what it printed after its first line."""
        if self.proc.poll() is None:
            self.proc.terminate()
        try:
            out, _ = self.proc.communicate(timeout=5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            out, _ = self.proc.communicate()
        return out

    def __enter__(self):
        return self.ready()

    def __exit__(self, *exc: object) -> None:
        self.stop()


class RobotProcess(_Process):
    """`episodic robot-server` on a free loopback port (``address``)."""

    def __init__(self, watchdog: float = 0.05, robot: str = "wam", task: str = "reach"):
        super().__init__(["-m", "episodic", "robot-server", "--port", "0", "--watchdog", str(watchdog),
                          "--robot", robot, "--task", task], "robot-server:")


class RelayProcess(_Process):
    """episodic.tools.relay in front of the robot at ``to`` with ``faults`` (``address``: where the runner sends)."""

    def __init__(self, to: str, faults: Faults, seed: int = 0):
        super().__init__(["-m", "episodic.tools.relay", "--to", to, "--delay", str(faults.delay),
                          "--jitter", str(faults.jitter), "--loss", str(faults.loss), "--reorder", str(faults.reorder),
                          "--drop-for", str(faults.drop_for), "--seed", str(seed)], "relay:", subprocess.PIPE)

    def set(self, faults: Faults) -> None:
        """Change the faults (once this returns, they apply)."""
        self._say(json.dumps(asdict(faults)))
        assert _first_line(self.proc, READY_TIMEOUT).startswith("faults"), "the relay did not take the faults"

    def drop(self) -> None:
        """Take the link down for the faults' drop_for s from now."""
        self._say("drop")

    def _say(self, line: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()


def _first_line(proc: subprocess.Popen, timeout: float) -> str:
    assert proc.stdout is not None
    ready, _, _ = select.select([proc.stdout], [], [], timeout)
    return proc.stdout.readline().strip() if ready else ""


@dataclass(frozen=True)
class Trial:
    """One reach episode: the flags of its replies, their messages, the tracking error rad
    (RMS over the move), the RMS desired speed rad/s over the move, and the link's statistics
    (None in the in-process mode, or when the episode is not in the log)."""

    flags: tuple[Flag, ...]
    message: str
    tracking: float
    speed: float
    link: LinkStats | None = None
    logged: bool = True  # the episode is in the runner's log

    @property
    def aborted(self) -> int:
        """Segments aborted (a reply other than OK)."""
        return sum(f != Flag.OK for f in self.flags)


def reach_episode(client: Sender, during: Callable[[], None] | None = None) -> Trial:
    """Run the module's reach episode through ``client`` (a bridge Client, or a Runner in this
    process); ``during()`` is called just before the move is sent (e.g. to start a fault)."""
    reply = client.start_episode(1)
    replies = [reply]
    if reply.flag == Flag.OK:
        assert reply.posture is not None
        q = min_jerk(reply.posture, reply.posture + OFFSET, MOVE_SECONDS, DT).q
        if during is not None:
            during()
        replies.append(client.send_trajectory(q, wait_time=HOLD_SECONDS))
    steps = client.get_episode()
    move = np.flatnonzero((steps["machine_state"] == MachineState.DO_MOTION) & (steps["index"] == 1))
    move = move[: round(MOVE_SECONDS / DT)]  # the move, not the hold after it
    return Trial(tuple(Flag(r.flag) for r in replies), "; ".join(r.message for r in replies if r.message),
                 rms(steps["q"][move] - steps["q_d"][move]), rms(steps["qd_d"][move]))


def trials(n: int, log: Path, robot_at: str, max_state_age: float = MAX_STATE_AGE,
           during: Callable[[int], Callable[[], None] | None] | None = None) -> list[Trial]:
    """``n`` reach episodes served by `episodic serve --robot-at` (realtime mode) on the robot
    at ``robot_at`` (HOST:PORT), logged to ``log`` (a new file); ``during(i)`` gives episode i's
    fault, if any. Each trial carries its episode's link statistics from the log; an episode
    missing from it is marked so (``logged``)."""
    with serving(log, robot_at, max_state_age) as (served, client):
        out = [reach_episode(client, during(i) if during else None) for i in range(n)]
        served.stop()
    return with_links(out, log)


def inprocess_trials(n: int) -> list[Trial]:
    """``n`` reach episodes in the in-process realtime mode: a Runner in this process, its
    simulation paced to the wall clock."""
    with Runner(make_task("reach"), "wam", mode="realtime") as runner:
        return [reach_episode(runner) for _ in range(n)]


@contextlib.contextmanager
def serving(log: Path, robot_at: str, max_state_age: float = MAX_STATE_AGE) -> Iterator[tuple[ServedRunner, Client]]:
    """`episodic serve --robot-at` logging to ``log``, and a client of it."""
    with start_runner(log, robot_at, max_state_age) as served:
        served.wait_ready()
        with Client(served.channel, timeout=10.0) as client:
            yield served, client


def start_runner(log: Path, robot_at: str, max_state_age: float = MAX_STATE_AGE) -> ServedRunner:
    """Start `episodic serve` as ``serving`` does, without waiting for it to serve."""
    args = ("--learner-timeout", "5", "--quiet", "--robot-at", robot_at, "--max-state-age", str(max_state_age))
    return ServedRunner(fresh_channel("link"), task="reach", log=log, mode="realtime", args=args)


def with_links(results: list[Trial], log: Path) -> list[Trial]:
    """``results``, the episodes of ``log`` in order, with their link statistics from it and
    whether each is there."""
    links = logged_links(read_metadata(log))
    n_logged = len(read_episodes(log))
    return [replace(t, link=links.get(i), logged=i < n_logged) for i, t in enumerate(results)]


def signal_later(process: _Process | ServedRunner, sig: int, after: float = 0.1) -> Callable[[], None]:
    """A fault: ``sig`` to ``process`` ``after`` s from when it is called (from a timer thread)."""
    def inject() -> None:
        send = process.signal if isinstance(process, _Process) else process.proc.send_signal
        threading.Timer(after, send, (sig,)).start()
    return inject


def probe(at: str, seconds: float) -> list[np.void]:
    """The robot's states over ``seconds`` s, asked for with a HELLO datagram (which does not
    feed its watchdog) every HELLO_PERIOD s; the states still queued at the end included."""
    host, port = address(at)
    dtype = datagram_dtype(N_DOFS)
    hello = np.zeros((), dtype)
    hello["version"], hello["kind"], hello["n_dofs"] = VERSION, Kind.HELLO, N_DOFS
    states: list[np.void] = []
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        sock.connect((host, port))
        sock.settimeout(HELLO_PERIOD)
        end = time.monotonic() + seconds
        asked = -np.inf
        while (now := time.monotonic()) < end or states:
            if now < end and now - asked >= HELLO_PERIOD:
                sock.send(hello.tobytes())
                asked = now
            elif now >= end:
                sock.setblocking(False)
            try:
                d = decode(sock.recv(65536), dtype, (Kind.STATE,))
            except (TimeoutError, ConnectionRefusedError):
                continue
            except BlockingIOError:
                break
            if d is not None:
                states.append(d.copy())
    return states
