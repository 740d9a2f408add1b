"""The network link's parts in one process, unpaced (real UDP sockets on loopback, real MuJoCo):
the datagram format, the robot server's own safety layer and the network driver's statistics
and halts. The processes, the relay's faults and real time: tests/test_network_faults.py."""
from __future__ import annotations

import contextlib
import socket
import time

import numpy as np
import pytest

from episodic.interface.robot import load_robot
from episodic.interface.vocabulary import Flag
from episodic.runtime.backend import JointCommand
from episodic.runtime.link import (
    VERSION,
    Kind,
    LinkStats,
    NetworkDriver,
    Status,
    address,
    datagram_dtype,
    decode,
    tracking_bound,
)
from episodic.runtime.scene import build_scene
from episodic.tasks import make_task
from episodic.tools.robot_server import RobotServer

N = 7


@pytest.fixture(scope="module")
def scene():
    return build_scene(load_robot("wam"), make_task("reach"))


class Machine:
    """What the driver halts through (the episode machine's ``halt``)."""

    halt: tuple[Flag, str] | None = None


def command(server: RobotServer, seq: int, q: np.ndarray, *, kind: Kind = Kind.COMMAND, stamp: float = 1.0) -> bytes:
    """A command datagram to hold ``q`` under the robot's gains, gravity compensated as a runner does."""
    d = np.zeros((), server.dtype)
    d["version"], d["kind"], d["n_dofs"], d["seq"], d["stamp"] = VERSION, kind, N, seq, stamp
    d["q"], d["kp"], d["kd"] = q, server.robot.kp, server.robot.kd
    d["u"] = server.plant.data.qfrc_bias[server.scene.dof_adr]
    return d.tobytes()


class Runner:
    """A runner's socket talking to ``server``."""

    def __init__(self, server: RobotServer):
        self.server = server
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.connect(server.address)
        self.sock.settimeout(1.0)

    def send(self, data: bytes) -> None:
        self.sock.send(data)  # on loopback, in the server's queue when send returns

    def state(self) -> np.void:
        """The newest state the server sent."""
        self.sock.setblocking(False)
        newest = None
        try:
            while True:
                newest = decode(self.sock.recv(65536), self.server.dtype, (Kind.STATE,))
        except BlockingIOError:
            pass
        self.sock.settimeout(1.0)
        assert newest is not None
        return newest


def test_a_datagram_is_32_plus_40_bytes_a_joint_little_endian_and_checked():
    dtype = datagram_dtype(N)
    assert dtype.itemsize == 32 + 40 * N
    assert dtype["stamp"].byteorder in "<="
    d = np.zeros((), dtype)
    d["version"], d["kind"], d["n_dofs"], d["seq"], d["q"] = VERSION, Kind.STATE, N, 7, np.arange(N)
    back = decode(d.tobytes(), dtype, (Kind.STATE,))
    assert back is not None and back["seq"] == 7 and np.array_equal(back["q"], np.arange(N))
    assert decode(d.tobytes(), dtype, (Kind.COMMAND,)) is None          # another kind
    assert decode(d.tobytes()[:-1], dtype, (Kind.STATE,)) is None       # short
    assert decode(d.tobytes(), datagram_dtype(6), (Kind.STATE,)) is None  # another robot
    d["q"][3] = np.nan
    assert decode(d.tobytes(), dtype, (Kind.STATE,)) is None            # not finite
    d["q"][3], d["version"] = 0, VERSION + 1
    assert decode(d.tobytes(), dtype, (Kind.STATE,)) is None            # another version
    assert address("127.0.0.1:7700") == ("127.0.0.1", 7700)
    with pytest.raises(ValueError, match="HOST:PORT"):
        address("7700")


def test_the_robot_follows_commands_and_brakes_when_they_stop(scene):
    server = RobotServer(scene, watchdog=0.02)
    runner = Runner(server)
    home = server.plant.read().q
    runner.send(command(server, 0, home, kind=Kind.HELLO))
    server.tick()
    assert Status(int(runner.state()["status"])) == Status.HOLDING  # nothing commanded yet
    goal = home + 0.05
    for seq in range(1, 150):
        runner.send(command(server, seq, goal, stamp=seq))
        server.tick()
        s = runner.state()
    assert Status(int(s["status"])) == Status(0) and s["echo"] == 149 and s["echo_stamp"] == 149
    np.testing.assert_allclose(s["q"], goal, atol=0.03)  # on its way there (the PD rings)
    time.sleep(0.03)  # past the watchdog
    server.tick()
    s = runner.state()
    assert Status(int(s["status"])) == Status.HOLDING | Status.WATCHDOG
    held = s["q"].copy()
    qs = []
    for _ in range(350):  # 0.7 s braked and holding under gravity compensation
        server.tick()
        s = runner.state()
        qs.append(s["q"])
    np.testing.assert_allclose(s["q"], held, atol=0.01)  # stopped near where it braked
    assert np.ptp(qs[250:], axis=0).max() < 5e-4 and np.abs(s["qd"]).max() < 2e-3  # and still from 0.5 s on
    # far from where it holds: refused; close to it: followed again
    runner.send(command(server, 200, held + 0.3))
    server.tick()
    s = runner.state()
    assert Status(int(s["status"])) & Status.COMMAND_REFUSED and s["echo"] == 200
    runner.send(command(server, 201, held))
    server.tick()
    assert Status(int(runner.state()["status"])) == Status(0)
    server.close()


def test_the_robot_clamps_positions_drops_old_bad_and_others_commands_and_brakes_over_its_velocity_limit(scene):
    server = RobotServer(scene)
    runner = Runner(server)
    q = server.plant.read().q
    runner.send(command(server, 5, q))
    server.tick()
    runner.send(command(server, 4, q + 0.05))  # older than the one in force
    server.tick()
    assert runner.state()["echo"] == 5 and server.counters.reordered == 1
    other = Runner(server)  # a second controller, while the first one's command is in force
    other.send(command(server, 9, q + 0.05))
    server.tick()
    s = other.state()  # a monitor gets the states too
    assert Status(int(s["status"])) & Status.OTHER_CONTROLLER and s["echo"] == 5
    runner.send(b"\x00" * 10)
    server.tick()
    assert Status(int(runner.state()["status"])) & Status.BAD_DATAGRAM
    server.tick()
    assert not Status(int(runner.state()["status"])) & Status.BAD_DATAGRAM  # reported once
    beyond = q.copy()
    beyond[0] = server.robot.range_upper[0] + 1.0
    runner.send(command(server, 6, beyond))  # also far, but a command in force is followed, clamped
    server.tick()
    assert Status(int(runner.state()["status"])) == Status.POSITION_CLAMPED
    server.plant.data.qvel[scene.dof_adr[3]] = 2 * server.robot.velocity_limit[3]  # a joint thrown too fast
    runner.send(command(server, 7, q))
    server.tick()
    s = runner.state()
    assert Status(int(s["status"])) == Status.HOLDING | Status.VELOCITY_LIMIT and s["echo"] == 7
    server.close()


def test_the_driver_counts_lost_and_reordered_states_and_halts_on_a_stale_one(scene):
    robot = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    robot.bind(("127.0.0.1", 0))
    driver = NetworkDriver(scene, *robot.getsockname(), max_age=0.05, connect_timeout=0.2)
    machine = Machine()
    driver.attach(machine)
    dtype = datagram_dtype(N)

    def state(seq: int, echo_stamp: float = 0.0, status: int = 0) -> None:
        d = np.zeros((), dtype)
        d["version"], d["kind"], d["n_dofs"], d["seq"], d["status"] = VERSION, Kind.STATE, N, seq, status
        d["echo"], d["echo_stamp"], d["q"] = seq, echo_stamp, scene.robot.home
        robot.sendto(d.tobytes(), peer)

    robot.settimeout(1.0)
    with pytest.raises(ConnectionError, match="no state from the robot"):
        driver.read()  # nobody answers: says so, within the connect timeout
    _, peer = robot.recvfrom(65536)  # its HELLO
    start = driver.counters.copy()
    for seq in (1, 2, 5, 3, 6):  # 3 and 4 lost, then 3 comes late
        state(seq, echo_stamp=time.perf_counter() - 0.004)
    time.sleep(0.005)
    np.testing.assert_array_equal(driver.read().q, scene.robot.home)
    stats = LinkStats.between(start, driver.counters)
    assert (stats.states, stats.lost, stats.reordered) == (5, 1, 1)
    assert 0.004 < stats.rtt_p50 < 0.1
    assert machine.halt is None
    assert "1 states lost, 1 reordered" in driver.note() and driver.note() == ""
    time.sleep(0.06)
    driver.read()  # nothing new for longer than max_age
    assert machine.halt is not None and machine.halt[0] == Flag.SAFETY_ABORT and "ms old" in machine.halt[1]
    state(7)
    time.sleep(0.002)
    driver.read()
    assert machine.halt is None  # fresh again: lifted
    state(8, echo_stamp=time.perf_counter(), status=Status.HOLDING | Status.COMMAND_REFUSED)
    time.sleep(0.002)
    driver.read()
    assert machine.halt is not None and "holds on its own" in machine.halt[1]
    driver.command(JointCommand(*(np.zeros(N),) * 5))
    robot.settimeout(0.05)
    sent = []
    with contextlib.suppress(TimeoutError):
        while True:
            sent.append(decode(robot.recv(65536), dtype, (Kind.COMMAND, Kind.HELLO)))
    assert [(int(d["kind"]), int(d["seq"])) for d in sent if d is not None][-1] == (Kind.COMMAND, 1)  # after HELLOs
    driver.close()
    robot.close()


def test_the_tracking_bound_is_the_speed_times_the_delay():
    qd = np.full((100, 7), 0.3)
    assert tracking_bound(qd, 0.01, 0.002) == pytest.approx(0.3 * 0.014)
    assert tracking_bound(np.zeros((0, 7)), 0.01, 0.002) == 0.0
