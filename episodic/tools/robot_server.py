"""`episodic robot-server`: a stand-in for a robot's real-time controller across a network.

It runs the arm in MuJoCo (the robot's model with the task's tool, as the runner's scene has it)
at its own clock, the robot's control rate, and speaks the datagrams of episodic.runtime.link
over UDP: every tick it applies the newest joint command received and sends its joint state to
everyone heard from in the last PEER_SECONDS (its runner; a monitor saying HELLO). One controller
at a time: commands from another address are ignored (Status.OTHER_CONTROLLER) while the one in
force commands within the watchdog time. Its own safety layer, whatever the runner does:

- watchdog: no command for ``watchdog`` s -> brake: hold the posture where it noticed, under its
  own PD gains, more damped (BRAKE_DAMPING), and gravity compensation (Status.WATCHDOG | HOLDING);
- joint range: a command's q_d is clamped to the robot's range (Status.POSITION_CLAMPED);
- velocity: a joint faster than its limit -> brake where it is (Status.VELOCITY_LIMIT | HOLDING);
- resuming: while holding, a command is taken only when its q_d is within the robot's
  max_start_jump of the held posture (else Status.COMMAND_REFUSED), so it never jumps;
- malformed datagrams are dropped (Status.BAD_DATAGRAM in the next state).
Torques saturate at the robot's limits in its model (robot.toml [safety] torque).
"""
from __future__ import annotations

import logging
import signal
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from episodic.runtime.backend import JointCommand, MujocoDriver
from episodic.runtime.link import VERSION, Kind, Status, datagram_dtype, decode
from episodic.runtime.pacing import Pacer
from episodic.runtime.scene import Scene
from episodic.runtime.scheduling import realtime_where_permitted

WATCHDOG = 0.05  # s without a command before the robot brakes (25 ticks at the WAM's 500 Hz)
# the brake: the robot's PD gains with this many times its damping (the WAM braked while ringing
# at 0.2 rad/s is still, under 1 mrad/s, within 0.5 s, where its own damping rings on past 0.8 s:
# tests/test_network_link.py)
BRAKE_DAMPING = 3.0
PEER_SECONDS = 1.0  # s a peer (a runner, a monitor saying HELLO) gets states after it was last heard
_log = logging.getLogger("episodic.tools.robot_server")


@dataclass
class RobotCounters:
    """What the robot has seen: commands applied, lost (gaps in the runner's seq), reordered
    (older than the one in force: dropped), malformed; ticks held by its own safety layer."""

    commands: int = 0
    lost: int = 0
    reordered: int = 0
    bad: int = 0
    held_ticks: int = 0


class RobotServer:
    """The robot of ``scene`` served on a UDP socket bound to ``host``:``port`` (0: any free
    port; ``address`` says which). ``tick()`` runs one control period unpaced (tests drive it
    so); ``serve()`` ticks at the control rate until ``stop()``."""

    def __init__(self, scene: Scene, host: str = "127.0.0.1", port: int = 0, watchdog: float = WATCHDOG):
        self.scene, self.robot = scene, scene.robot
        self.watchdog = watchdog
        self.plant = MujocoDriver(scene)
        self.dtype = datagram_dtype(self.robot.n_dofs)
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.bind((host, port))
        self.sock.setblocking(False)
        self.address: tuple[str, int] = self.sock.getsockname()
        self.peers: dict[tuple[str, int], float] = {}  # where states go: who sent a valid datagram, and when last
        self._source: tuple[str, int] | None = None  # who sent the command in force
        self.counters = RobotCounters()
        self.status = Status.HOLDING
        self._ticks = 0
        self._in_force: np.void | None = None  # the runner's command in force (None: holding)
        self._refused: np.void | None = None   # while holding: the command it refused or braked under
        self._hold_q = self.plant.read().q     # the posture held while holding
        self._last_command = -np.inf           # when the last command arrived (time.monotonic s)
        self._out = np.zeros((), self.dtype)
        self._out["version"], self._out["kind"], self._out["n_dofs"] = VERSION, Kind.STATE, self.robot.n_dofs
        self._running = True

    # -- one tick --------------------------------------------------------------------
    def tick(self) -> None:
        """Take the commands that arrived, apply the safety layer, run one control period of
        physics and send the state."""
        now = time.monotonic()
        events = self._receive(now)
        state = self.plant.read()
        if np.any(np.abs(state.qd) > self.robot.velocity_limit):
            self._brake(state.q, Status.VELOCITY_LIMIT)
        elif self._in_force is not None and now - self._last_command > self.watchdog:
            self._brake(state.q, Status.WATCHDOG)
        self.status |= events
        self.plant.command(self._command(state.q, state.qd))
        self.plant.wait_tick()  # one control period of physics (unpaced)
        self.counters.held_ticks += self._in_force is None
        self._send(now)
        self._ticks += 1

    def _brake(self, q: np.ndarray, why: Status) -> None:
        """Hold ``q`` from now on (until a command close enough to it arrives); a brake for the
        velocity limit names the command it braked under (``echo``)."""
        self._refused = self._in_force if why == Status.VELOCITY_LIMIT else None
        self._in_force, self._hold_q = None, q.copy()
        self.status = Status.HOLDING | why

    def _receive(self, now: float) -> Status:
        """Read every waiting datagram; take the newest command when the safety layer lets it.
        A command from another address than the one in force starts a new numbering (a new runner)."""
        events = Status(0)
        newest, arrived = None, 0  # the newest command and how many arrived in order
        while True:
            try:
                data, peer = self.sock.recvfrom(65536)
            except (BlockingIOError, ConnectionRefusedError):
                break
            d = decode(data, self.dtype, (Kind.COMMAND, Kind.HELLO))
            if d is None or (d["kind"] == Kind.COMMAND and (np.any(d["kp"] < 0) or np.any(d["kd"] < 0))):
                self.counters.bad += 1
                events |= Status.BAD_DATAGRAM
                continue
            self.peers[peer] = now
            if d["kind"] == Kind.HELLO:
                continue
            if peer != self._source:
                if self._in_force is not None and now - self._last_command <= self.watchdog:
                    events |= Status.OTHER_CONTROLLER  # its controller is alive: one controller at a time
                    continue
                self._source, newest, arrived = peer, None, 0
                if self._in_force is not None:
                    self._brake(self.plant.read().q, Status(0))  # the old runner's command ends here
            if newest is not None and _older(d, newest):
                self.counters.reordered += 1
                continue
            newest, arrived = d, arrived + 1
        if newest is None:
            return events
        if self._in_force is not None and _older(newest, self._in_force):
            self.counters.reordered += 1
            return events
        self.counters.commands += 1
        if self._in_force is not None:
            self.counters.lost += max(_gap(self._in_force, newest) - arrived, 0)
        q_d = self.robot.clamp(newest["q"])
        if self._in_force is None and np.max(np.abs(q_d - self._hold_q)) > self.robot.max_start_jump:
            self._refused = newest  # holding: only a command near the held posture resumes
            self.status |= Status.COMMAND_REFUSED
            return events
        self._in_force, self._refused, self._last_command = newest, None, now
        self.status = Status.POSITION_CLAMPED if np.any(q_d != newest["q"]) else Status(0)
        return events

    def _command(self, q: np.ndarray, qd: np.ndarray) -> JointCommand:
        """The command in force, or the brake: hold at the held posture under the robot's PD
        gains (BRAKE_DAMPING times its damping) with gravity (and Coriolis) compensation at the
        measured state."""
        c = self._in_force
        if c is not None:
            return JointCommand(self.robot.clamp(c["q"]), c["qd"], c["u"], c["kp"], c["kd"])
        bias = self.plant.data.qfrc_bias[self.scene.dof_adr].copy()
        zero = np.zeros(self.robot.n_dofs)
        return JointCommand(self._hold_q, zero, bias, self.robot.kp, BRAKE_DAMPING * self.robot.kd)

    def _send(self, now: float) -> None:
        """The state to every peer heard from within PEER_SECONDS."""
        for peer in [p for p, heard in self.peers.items() if now - heard > PEER_SECONDS]:
            del self.peers[peer]
        if not self.peers:
            return
        d, out = self.plant.read(), self._out
        c = self._in_force if self._in_force is not None else self._refused
        out["status"], out["seq"] = int(self.status), self._ticks & 0xFFFFFFFF
        out["echo"] = 0 if c is None else c["seq"]
        out["echo_stamp"] = 0.0 if c is None else c["stamp"]
        out["stamp"], out["q"], out["qd"], out["u"] = d.time, d.q, d.qd, d.u
        act = self.scene.actuator
        out["kp"] = -self.plant.model.actuator_biasprm[act, 1]
        out["kd"] = -self.plant.model.actuator_biasprm[act, 2]
        self.status &= ~(Status.BAD_DATAGRAM | Status.OTHER_CONTROLLER)  # reported once
        data = out.tobytes()
        for peer in self.peers:
            try:
                self.sock.sendto(data, peer)
            except OSError:
                pass  # the runner is gone or the link is down: the watchdog takes care of the robot

    # -- the loop ----------------------------------------------------------------------
    def serve(self) -> None:
        """Tick at the robot's control rate until ``stop()``."""
        pacer = Pacer(self.robot.control_dt)
        while self._running:
            pacer.wait()
            self.tick()

    def stop(self, *_: object) -> None:
        """End ``serve`` after the tick in progress (safe from a signal handler)."""
        self._running = False

    def close(self) -> None:
        self.sock.close()


def _gap(a: np.void, b: np.void) -> int:
    """How many commands after ``a`` ``b`` is (modulo 2**32)."""
    return (int(b["seq"]) - int(a["seq"])) & 0xFFFFFFFF


def _older(a: np.void, b: np.void) -> bool:
    """Whether command ``a`` is not newer than ``b``."""
    gap = _gap(b, a)
    return gap == 0 or gap >= 1 << 31


def run(scene: Scene, host: str, port: int, watchdog: float, priority: int | None = None,
        announce: Callable[[str], object] = print) -> None:
    """Serve the robot until SIGTERM or SIGINT, under SCHED_FIFO at ``priority`` (None: at
    REALTIME_PRIORITY where permitted, else a warning), as a robot's real-time controller runs;
    ``announce`` gets the line saying where."""
    realtime_where_permitted(priority, lambda why: _log.warning(
        "running without real-time scheduling (%s); expect more jitter", why))
    server = RobotServer(scene, host, port, watchdog)
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, server.stop)
    host, port = server.address
    announce(f"robot-server: robot {scene.robot.name} at {host}:{port}, {scene.robot.control_rate:g} Hz, "
             f"watchdog {watchdog * 1e3:g} ms; stop with Ctrl-C")
    try:
        server.serve()
    finally:
        server.close()


