"""A robot across a network: the datagram format its link speaks, the runner's network driver
(a JointDriver, episodic.runtime.backend) and the link's statistics.

The robot side is `episodic robot-server` (episodic.tools.robot_server); the runner side is
``NetworkDriver``, which `episodic serve --robot-at HOST:PORT` drives realtime episodes through
(``network_runner``). docs/drivers.md describes the contract and this driver as its example.

Datagram (one schema both ways, little-endian, ``datagram_dtype(n_dofs)``; 32 + 40 n bytes):

    offset  field       type       runner -> robot (COMMAND, HELLO)        robot -> runner (STATE)
    0       version     u1         VERSION                                 VERSION
    1       kind        u1         COMMAND, or HELLO (asks for state only) STATE
    2       n_dofs      u1         n                                       n
    3       reserved    u1         0                                       0
    4       status      <u4        0                                       the status word (Status)
    8       seq         <u4        the runner's command count              the robot's tick count
    12      echo        <u4        0                                       seq of the command in force
    16      stamp       <f8        runner's clock at sending, s            robot's clock (its physics time), s
    24      echo_stamp  <f8        0                                       stamp of the command in force, s
    32      q           <f8 (n,)   desired q_d, rad                        measured q, rad
    ..      qd          <f8 (n,)   desired qd_d, rad/s                     measured qd, rad/s
    ..      u           <f8 (n,)   feedforward u_ff, N m                   torque applied in the last tick, N m
    ..      kp          <f8 (n,)   gain, N m/rad                           gain in force, N m/rad
    ..      kd          <f8 (n,)   gain, N m s/rad                         gain in force, N m s/rad

The runner measures the link from what comes back: states lost (gaps in the robot's seq) and
reordered (an older seq after a newer one), and the round trip (runner clock now - echo_stamp,
at the tick that reads the state: within one control period of the real one).
"""
from __future__ import annotations

import enum
import json
import math
import socket
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any, Protocol

import numpy as np

from episodic.interface.robot import Robot
from episodic.interface.vocabulary import Flag
from episodic.logs.episode import EpisodeBuffer
from episodic.logs.timing import N_BINS, Mark, bin_index, quantiles
from episodic.runtime.backend import JointCommand, JointState
from episodic.runtime.pacing import Pacer
from episodic.runtime.runner import Runner
from episodic.runtime.scene import Scene
from episodic.task import Task

VERSION = 1
MAX_STATE_AGE = 0.05   # s: a state older than this (no newer one, plus half the round trip) aborts the segment
CONNECT_TIMEOUT = 2.0  # s: how long the first read waits for the robot's first state
LINK_ATTR = "link_{:06d}"  # the log's root attribute holding episode NNNNNN's link statistics (JSON)


class Kind(enum.IntEnum):
    """What a datagram carries."""

    COMMAND = 1  # runner -> robot: a joint command
    STATE = 2    # robot -> runner: the measured joint state
    HELLO = 3    # runner -> robot: no command, send me your state (does not feed the watchdog)


class Status(enum.IntFlag):
    """The robot's status word (a STATE's ``status``): what its own safety layer is doing."""

    HOLDING = 1             # holding its own posture (no command yet, the watchdog, a limit), not the runner's command
    WATCHDOG = 2            # no command for longer than the watchdog time: braked and holding
    POSITION_CLAMPED = 4    # the command in force asked for a position outside the joint range: clamped
    VELOCITY_LIMIT = 8      # a joint moved faster than its limit: braked and holding
    COMMAND_REFUSED = 16    # a command while holding was farther than max_start_jump from the posture held
    BAD_DATAGRAM = 32       # a datagram since the last state was malformed (wrong size, version, kind, n_dofs, values)
    OTHER_CONTROLLER = 64   # a command came from another address than the live controller's: ignored


def datagram_dtype(n_dofs: int) -> np.dtype:
    """The datagram of a robot with ``n_dofs`` joints (module docstring)."""
    v = ("<f8", (n_dofs,))
    return np.dtype([("version", "u1"), ("kind", "u1"), ("n_dofs", "u1"), ("reserved", "u1"),
                     ("status", "<u4"), ("seq", "<u4"), ("echo", "<u4"), ("stamp", "<f8"), ("echo_stamp", "<f8"),
                     ("q", *v), ("qd", *v), ("u", *v), ("kp", *v), ("kd", *v)])


def decode(data: bytes, dtype: np.dtype, kinds: tuple[Kind, ...]) -> np.void | None:
    """The datagram in ``data`` if it is one of ``kinds`` for this robot (its size, version and
    n_dofs right, its numbers finite), else None."""
    if len(data) != dtype.itemsize:
        return None
    d: np.void = np.frombuffer(data, dtype)[0]
    n = dtype["q"].shape[0]
    if d["version"] != VERSION or d["n_dofs"] != n or d["kind"] not in kinds:
        return None
    if not all(np.isfinite(d[name]).all() for name in ("stamp", "q", "qd", "u", "kp", "kd")):
        return None
    return d


def address(text: str) -> tuple[str, int]:
    """``HOST:PORT`` as (host, port); ValueError saying what is wrong."""
    host, sep, port = text.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"robot address '{text}' is not HOST:PORT (e.g. 127.0.0.1:7700)")
    return host, int(port)


@dataclass
class LinkCounters:
    """What the runner has seen of the link so far (cumulative; ``copy`` marks a moment)."""

    states: int = 0          # state datagrams received (valid)
    lost: int = 0            # states never received (gaps in the robot's seq)
    reordered: int = 0       # states that came after a newer one (not used)
    bad: int = 0             # datagrams that were not a valid state of this robot
    stale_ticks: int = 0     # ticks whose state was older than the bound (MAX_STATE_AGE)
    repeated_ticks: int = 0  # ticks that found no new state since the tick before
    rtt_counts: np.ndarray = field(default_factory=lambda: np.zeros(N_BINS, np.int64))  # round trips per bin

    def copy(self) -> LinkCounters:
        return LinkCounters(self.states, self.lost, self.reordered, self.bad, self.stale_ticks,
                            self.repeated_ticks, self.rtt_counts.copy())


@dataclass(frozen=True)
class LinkStats:
    """The link over some span: state datagrams received, lost and reordered, invalid
    datagrams, ticks with a stale state and ticks without a new one, and the round trip s
    (median, 99th percentile, maximum; 0 when none measured)."""

    states: int
    lost: int
    reordered: int
    bad: int
    stale_ticks: int
    repeated_ticks: int
    rtt_p50: float
    rtt_p99: float
    rtt_max: float

    @classmethod
    def between(cls, start: LinkCounters, end: LinkCounters) -> LinkStats:
        p50, p99, top = quantiles(end.rtt_counts - start.rtt_counts, (0.5, 0.99, 1.0))
        return cls(end.states - start.states, end.lost - start.lost, end.reordered - start.reordered,
                   end.bad - start.bad, end.stale_ticks - start.stale_ticks,
                   end.repeated_ticks - start.repeated_ticks, p50, p99, top)

    @property
    def suffered(self) -> bool:
        """Whether anything went wrong: states lost, reordered or invalid, or a stale tick."""
        return bool(self.lost or self.reordered or self.bad or self.stale_ticks)

    def summary(self) -> str:
        """One line, e.g. for a reply's message."""
        return (f"link: {self.lost} states lost, {self.reordered} reordered, {self.bad} invalid, "
                f"{self.stale_ticks} ticks stale; round trip p50 {self.rtt_p50 * 1e3:.1f} ms, "
                f"p99 {self.rtt_p99 * 1e3:.1f} ms")


@dataclass(frozen=True)
class LinkMark(Mark):
    """A tick record's mark (episodic.logs.timing.Mark) with the link's counters at that moment:
    an episode's two marks (EpisodeBuffer.ticks) give its link statistics."""

    link: LinkCounters = field(default_factory=LinkCounters)


class LinkPacer(Pacer):
    """The runner's tick record of a networked robot: its marks carry the link's counters."""

    def __init__(self, dt: float, counters: LinkCounters):
        super().__init__(dt)
        self.counters = counters

    def mark(self) -> LinkMark:
        m = super().mark()
        return LinkMark(m.ticks, m.missed, m.counts, self.counters.copy())


class Haltable(Protocol):
    """What the driver stops paced motion through: an object with a ``halt`` attribute
    (episodic.runtime.machine.EpisodeMachine.halt: (flag, message) or None)."""

    halt: tuple[Flag, str] | None


class NetworkDriver:
    """A JointDriver for a robot served over UDP (`episodic robot-server`, or a vendor's box
    speaking the same datagrams) at ``host``:``port``.

    Each tick: ``read`` takes every state datagram that arrived (never waits, but for the first
    state, up to CONNECT_TIMEOUT s) and returns the newest; ``command`` sends one command
    datagram; ``wait_tick`` keeps the runner's own clock (a Pacer). The robot runs its joint
    controller on its own clock and holds on its own when commands stop.

    A state older than ``max_age`` s (none newer has come for that long, plus half the last
    round trip), or a robot that says it braked under or refused a command sent within
    ``max_age`` s (Status.VELOCITY_LIMIT, Status.COMMAND_REFUSED), makes ``halt`` (set by
    ``attach``) stop paced motion at this tick with Flag.SAFETY_ABORT: the segment is aborted
    and the runner holds the posture last measured; once fresh states come again the halt is
    lifted."""

    def __init__(self, scene: Scene, host: str, port: int, max_age: float = MAX_STATE_AGE,
                 connect_timeout: float = CONNECT_TIMEOUT):
        self.robot: Robot = scene.robot
        self.where = f"{host}:{port}"
        self.max_age = max_age
        self.connect_timeout = connect_timeout
        self.dtype = datagram_dtype(self.robot.n_dofs)
        self.counters = LinkCounters()
        self.pacer = LinkPacer(self.robot.control_dt, self.counters)
        self._clock = Pacer(self.robot.control_dt)  # the runner's tick clock (the LinkPacer records the ticks)
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.connect((host, port))
        self.sock.setblocking(False)
        self._out = np.zeros((), self.dtype)
        self._out["version"], self._out["n_dofs"] = VERSION, self.robot.n_dofs
        self._seq = 0
        self._newest: np.void | None = None  # the newest state received
        self._arrived = 0.0                  # when it was read (perf_counter s)
        self._rtt = 0.0                      # the last round trip measured, s
        self._echo = -1                      # the newest command seq the robot echoed
        self._since_reply = self.counters.copy()  # the counters when the last reply's note was made
        self.halt: Haltable | None = None
        self._halting: tuple[Flag, str] | None = None  # the halt this driver set, while it stands

    # -- the JointDriver contract ------------------------------------------------
    def read(self) -> JointState:
        """The newest joint state received (module docstring); ConnectionError when the robot
        never answered."""
        if self._newest is None:
            self._connect()
        else:
            self._receive()
        self._check_age()
        d = self._newest
        assert d is not None, "_connect returns with a state or raises"
        return JointState(float(d["stamp"]), d["q"].copy(), d["qd"].copy(), d["u"].copy())

    def command(self, command: JointCommand) -> None:
        """Send ``command`` (a lost datagram is not resent: the next tick's supersedes it)."""
        out = self._out
        self._seq = (self._seq + 1) & 0xFFFFFFFF
        out["kind"], out["seq"], out["stamp"] = Kind.COMMAND, self._seq, time.perf_counter()
        out["q"], out["qd"], out["u"], out["kp"], out["kd"] = (command.q_d, command.qd_d, command.u_ff,
                                                               command.kp, command.kd)
        self._send(out)

    def wait_tick(self) -> tuple[float, bool]:
        """Block until the runner's next tick (its own clock)."""
        return self._clock.wait()

    # -- the link --------------------------------------------------------------------
    def _send(self, out: np.ndarray) -> None:
        try:
            self.sock.send(out.tobytes())
        except OSError:  # nobody listens (ICMP refused), buffer full: the state's age will tell
            pass

    def _connect(self) -> None:
        hello = self._out.copy()
        hello["kind"] = Kind.HELLO
        deadline = time.perf_counter() + self.connect_timeout
        while self._newest is None:
            if time.perf_counter() > deadline:
                raise ConnectionError(f"no state from the robot at {self.where} within {self.connect_timeout} s; "
                                      f"start it (`episodic robot-server`) or check the address and firewall")
            self._send(hello)
            time.sleep(0.01)
            self._receive()

    def _receive(self) -> None:
        """Take every datagram waiting; keep the newest state."""
        c = self.counters
        fresh = False
        now = time.perf_counter()
        while True:
            try:
                data = self.sock.recv(65536)
            except (BlockingIOError, ConnectionRefusedError):
                break
            d = decode(data, self.dtype, (Kind.STATE,))
            if d is None:
                c.bad += 1
                continue
            c.states += 1
            if self._newest is not None:
                gap = (int(d["seq"]) - int(self._newest["seq"])) & 0xFFFFFFFF
                if gap == 0 or gap >= 1 << 31:  # a duplicate, or an older state than the newest
                    c.reordered += 1
                    c.lost -= gap != 0  # an older one was counted lost when the gap was seen
                    continue
                c.lost += gap - 1
            self._newest, self._arrived, fresh = d, now, True
            if int(d["echo"]) != self._echo and d["echo_stamp"] > 0:
                self._echo = int(d["echo"])
                self._rtt = now - float(d["echo_stamp"])
                c.rtt_counts[bin_index(max(self._rtt, 0.0))] += 1
        if not fresh:
            c.repeated_ticks += 1

    def _check_age(self) -> None:
        now = time.perf_counter()
        age = now - self._arrived + self._rtt / 2
        stale = age > self.max_age
        self.counters.stale_ticks += stale
        d = self._newest
        assert d is not None, "checked after a state came"
        # the robot braked under, or refused, a command sent within the bound: it is not following
        braked = Status(int(d["status"])) & (Status.VELOCITY_LIMIT | Status.COMMAND_REFUSED) \
            and now - float(d["echo_stamp"]) <= self.max_age
        if self.halt is None:
            return
        if (stale or braked) and self.halt.halt is None:
            why = (f"the robot's state at {self.where} is {age * 1e3:.0f} ms old (at most "
                   f"{self.max_age * 1e3:.0f} ms): link lost or too slow" if stale else
                   f"the robot at {self.where} holds on its own ({Status(int(d['status'])).name})")
            self._halting = (Flag.SAFETY_ABORT, f"{why}; segment aborted, robot holds")
            self.halt.halt = self._halting
        elif not (stale or braked) and self._halting is not None:
            if self.halt.halt is self._halting:
                self.halt.halt = None
            self._halting = None

    def note(self) -> str:
        """What the link suffered since the last note ('' when nothing): for the reply."""
        stats = LinkStats.between(self._since_reply, self.counters)
        self._since_reply = self.counters.copy()
        return stats.summary() if stats.suffered else ""

    def attach(self, halt: Haltable) -> None:
        """Stop paced motion through ``halt.halt`` when the state is stale (class docstring)."""
        self.halt = halt

    def close(self) -> None:
        self.sock.close()


def episode_link(ep: EpisodeBuffer) -> LinkStats | None:
    """The link statistics of a finished episode of a networked runner (None for any other)."""
    if ep.ticks is None or not all(isinstance(m, LinkMark) for m in ep.ticks):
        return None
    start, end = ep.ticks
    assert isinstance(start, LinkMark) and isinstance(end, LinkMark)
    return LinkStats.between(start.link, end.link)


def network_runner(task: Task, robot: Robot | str, at: str, *, max_age: float = MAX_STATE_AGE,
                   connect_timeout: float = CONNECT_TIMEOUT, make: Callable[..., Runner] = Runner,
                   **kwargs: Any) -> Runner:
    """A realtime runner (``make(task, robot, driver=..., **kwargs)``: Runner or a subclass) of
    the robot served at ``at`` (HOST:PORT): stale state halts its paced motion, a reply says
    what the link suffered during its command (DriverBackend.note), and each finished
    episode's link statistics go to its log (root attribute LINK_ATTR, JSON). ValueError for a malformed address,
    ConnectionError when the robot does not answer."""
    host, port = address(at)
    drivers: list[NetworkDriver] = []

    def driver(scene: Scene) -> NetworkDriver:
        drivers.append(NetworkDriver(scene, host, port, max_age, connect_timeout))
        return drivers[-1]

    runner = make(task, robot, driver=driver, **kwargs)
    drivers[-1].attach(runner.machine)

    def log_link(ep: EpisodeBuffer) -> None:
        stats = episode_link(ep)
        if stats is not None and runner.log is not None:
            runner.log.set_attrs({LINK_ATTR.format(ep.number): json.dumps(asdict(stats))})

    runner.subscribe(log_link)
    return runner


def logged_links(meta: dict[str, Any]) -> dict[int, LinkStats]:
    """The link statistics a log's root attributes (episodic.logs.read_metadata) hold, by episode number."""
    prefix = LINK_ATTR.split("{")[0]
    out = {}
    for key, value in meta.items():
        if key.startswith(prefix) and key[len(prefix):].isdigit():
            stats = value if isinstance(value, dict) else json.loads(value)
            out[int(key[len(prefix):])] = LinkStats(**stats)
    return dict(sorted(out.items()))


def tracking_bound(qd_desired: np.ndarray, round_trip: float, dt: float) -> float:
    """How much more RMS tracking error rad a link adds to a joint's motion, at most: the runner
    sees the robot (round_trip + 2 dt) s behind its commands (the round trip, and up to a control
    period on each side where the two clocks are not in phase), so its error grows by at most
    the RMS desired speed (rad/s, any shape) times that delay."""
    return float(np.sqrt(np.mean(np.square(qd_desired)))) * (round_trip + 2 * dt) if qd_desired.size else 0.0


def rms(x: np.ndarray) -> float:
    """Root mean square of ``x`` (0 when empty)."""
    return math.sqrt(float(np.mean(np.square(x)))) if x.size else 0.0
