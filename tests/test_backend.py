"""The robot seam: a JointDriver (here the MuJoCo reference driver) behind DriverBackend drives
the same episodes as the simulation backend."""
from __future__ import annotations

import ast
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from episodic.interface.commands import Feedforward, GainsCommand, StartCommand, TrajectoryCommand
from episodic.interface.robot import load_robot
from episodic.interface.trajectory import min_jerk
from episodic.interface.vocabulary import Flag, MachineState
from episodic.logs import read_episodes
from episodic.runtime import machine, motion_clock, recorder, start
from episodic.runtime.backend import Backend, DriverBackend, MujocoDriver
from episodic.runtime.control import Gains
from episodic.runtime.runner import Runner
from episodic.runtime.scene import build_scene
from episodic.runtime.simulation import Simulation
from episodic.tasks import make_task
from tests.helpers import ROOT

HOME = np.array([0, 0.5876, 0, 1.36, 0, -0.321, -1.57])
GOAL = HOME + np.array([0.3, -0.2, 0.2, 0.3, 0.2, 0.2, 0.3])
KP = np.array([200, 300, 100, 100, 10, 10, 2.5])
KD = np.array([7, 15, 5, 2.5, 0.3, 0.3, 0.05])


def episode(mode: str):
    move = min_jerk(HOME, GOAL, 0.6, 0.002).q
    back = min_jerk(GOAL, HOME, 0.6, 0.002).q
    return [StartCommand(1, 4), TrajectoryCommand(1, 1, 4, move),
            GainsCommand(1, 2, 4, KP, KD, feedforward=mode, wait_time=0.1),
            TrajectoryCommand(1, 3, 4, back, wait_time=0.1),
            GainsCommand(1, 4, 4, KP, KD, ki=np.full(7, 5.0), wait_time=0.2)]


@pytest.mark.parametrize("mode", ["none", "feedforward", "inverse_dynamics"])
def test_a_driver_moves_the_robot_as_the_simulation_does(mode):
    steps = {}
    for name, kw in (("simulation", {}), ("driver", {"driver": MujocoDriver})):
        with Runner(make_task("reach"), **kw) as r:
            assert [r.send(c).flag for c in episode(mode)] == [Flag.OK] * 5
            steps[name] = r.episodes[0].steps()
    sim, drv = steps["simulation"], steps["driver"]
    assert sim["q"].shape == drv["q"].shape
    # the same physics, the law split between runner and driver: equal to rounding
    np.testing.assert_allclose(drv["q"], sim["q"], rtol=0, atol=1e-9)
    np.testing.assert_allclose(drv["u"], sim["u"], rtol=0, atol=1e-6)
    np.testing.assert_allclose(drv["ee_pos"], sim["ee_pos"], rtol=0, atol=1e-9)
    np.testing.assert_array_equal(drv["q_d"], sim["q_d"])


def test_driver_backend_takes_the_robot_where_it_is_and_records_ticks():
    def bent(scene):
        driver = MujocoDriver(scene)
        driver.data.qpos[scene.qpos_adr] = HOME + 0.2
        return driver

    with Runner(make_task("reach"), driver=bent) as r:
        assert r.mode == "realtime"
        np.testing.assert_allclose(r.sim.q, HOME + 0.2)          # not teleported home
        assert r.send(StartCommand(1, 1)).flag == Flag.OK       # goes home the robot's way
        np.testing.assert_allclose(r.sim.q, HOME, atol=r.robot.goto.tolerance_q)
        r.send(TrajectoryCommand(1, 1, 1, min_jerk(HOME, GOAL, 0.4, 0.002).q))
        ep = r.episodes[0]
    steps = ep.steps()
    assert (steps["machine_state"] == MachineState.GOTO_START).sum() > 100
    assert ep.timing["timing_ticks"] == ep.n_steps
    with pytest.raises(RuntimeError, match="replay"):
        r.sim.set_state(np.zeros(3))


def test_a_velocity_over_the_limit_stops_the_driver_at_that_tick():
    jump = np.repeat(HOME[None], 400, axis=0)
    jump[10:, 0] += 1.5
    with Runner(make_task("reach"), driver=MujocoDriver) as r:
        r.send(StartCommand(1, 1))
        reply = r.send(TrajectoryCommand(1, 1, 1, jump))
        assert reply.flag == Flag.SAFETY_ABORT and 10 < reply.n_steps < 400
        assert np.abs(r.sim.qd[0]) > r.robot.velocity_limit[0]
        motion = r.episodes[0].steps()["machine_state"] == MachineState.DO_MOTION
        assert motion.sum() == reply.n_steps


def test_both_backends_are_backends_and_the_driver_is_no_simulation():
    scene = build_scene(load_robot("wam"), make_task("reach"))
    driver = DriverBackend(scene, MujocoDriver(scene))
    assert isinstance(Simulation(scene), Backend) and isinstance(driver, Backend)
    assert not isinstance(driver, Simulation)


def backend_uses() -> set[str]:
    """The attributes the episode machine and its parts use of their backend (``sim.X`` or
    ``self.sim.X``)."""
    uses = set()
    for module in (machine, recorder, start, motion_clock):
        tree = ast.parse(Path(module.__file__).read_text())
        uses |= {node.attr for node in ast.walk(tree)
                 if isinstance(node, ast.Attribute) and ast.unparse(node.value) in ("sim", "self.sim")}
    return uses


def test_the_backend_protocol_declares_all_the_machine_uses_and_both_backends_have_it():
    declared = {name for name in dir(Backend) if not name.startswith("_")} | set(Backend.__annotations__)
    uses = backend_uses()
    assert {"run", "get_state", "can_start_exactly", "apply_gains", "pacer"} <= uses
    assert uses <= declared, f"used but not declared in Backend: {sorted(uses - declared)}"
    scene = build_scene(load_robot("wam"), make_task("reach"))
    for backend in (Simulation(scene), DriverBackend(scene, MujocoDriver(scene))):
        assert all(hasattr(backend, name) for name in declared), type(backend).__name__
    names = {node.id for node in ast.walk(ast.parse(Path(machine.__file__).read_text())) if isinstance(node, ast.Name)}
    assert "Simulation" not in names  # no type checks on the backend


@pytest.mark.parametrize("mode", list(Feedforward))
def test_driver_and_simulation_run_the_same_tick_with_a_feedback_law(mode):
    """A task's feedback law, an integral gain and every u_ff mode: both loops run
    Controller.tick, so the driver's robot follows the simulated one to rounding."""
    robot = load_robot("wam")
    scene = build_scene(robot, make_task("reach"))
    desired = min_jerk(HOME, GOAL, 0.4, robot.control_dt)

    def feedback(data):  # offsets rad (n_dofs,) from the measured state
        return 0.01 * np.sin(7 * data.time + np.arange(7)) + 1e-3 * data.qvel[scene.dof_adr]

    gains = Gains(KP, KD, np.full(7, 3.0), mode)
    records = []
    for backend in (Simulation(scene), DriverBackend(scene, MujocoDriver(scene))):
        backend.reset(HOME)
        records.append(backend.run(desired, gains, feedback))
    sim, drv = records
    q = [scene.qpos(r.state)[:, scene.qpos_adr] for r in records]
    np.testing.assert_allclose(q[1], q[0], rtol=0, atol=1e-9)
    np.testing.assert_allclose(drv.desired.q, sim.desired.q, rtol=0, atol=1e-9)
    assert np.abs(sim.desired.q - robot.clamp(desired.q)).max() > 1e-3  # the offsets were applied
    np.testing.assert_allclose(drv.u_ff, sim.u_ff, rtol=0, atol=1e-6)


DRIVEN_EPISODES = """
import sys, time
import numpy as np
from episodic.runtime.backend import MujocoDriver
from episodic.interface.commands import StartCommand, TrajectoryCommand
from episodic.runtime.runner import Runner
from episodic.tasks import make_task

with Runner(make_task("reach"), driver=lambda scene: MujocoDriver(scene, pace=True), log=sys.argv[1]) as r:
    for episode_id in range(1, 10_000):
        start = r.send(StartCommand(episode_id, 1))
        r.send(TrajectoryCommand(episode_id, 1, 1, np.repeat(start.posture[None], 50, axis=0)))
        print(episode_id, time.monotonic(), flush=True)
"""


@pytest.mark.slow
@pytest.mark.serial
def test_a_driven_robot_logs_finished_episodes_between_its_ticks(tmp_path):
    """A driven robot runs episodes back to back with no idle tick (a prompt learner); its log is
    written a piece per tick, so a SIGKILL finds every episode that finished over 2 s earlier on
    disk, readable. (The pieces are written in each tick's spare time, so how far the log trails
    depends on the machine: on 2 shared cores it trailed by just over 1 s once.)"""
    log = tmp_path / "driven.h5"
    child = subprocess.Popen([sys.executable, "-c", DRIVEN_EPISODES, str(log)], cwd=ROOT,
                             stdout=subprocess.PIPE, text=True)
    first = child.stdout.readline()  # the first episode has finished (however long the start took)
    time.sleep(4.0)
    child.send_signal(signal.SIGKILL)
    killed = time.monotonic()
    out, _ = child.communicate(timeout=10)
    out = first + out
    finished = {int(i): float(t) for i, t in (line.split() for line in out.splitlines())}
    due = {i for i, t in finished.items() if t < killed - 2.0}
    on_disk = {e.attrs["episode_id"] for e in read_episodes(log)}
    print(f"{len(finished)} episodes finished, {len(due)} over 2 s before the kill, {len(on_disk)} on disk")
    assert len(due) >= 5 and due <= on_disk
    with Runner(make_task("reach"), driver=MujocoDriver, log=tmp_path / "queued.h5") as r:
        assert r.log.writer == "ticks"  # written between ticks, not in the tick that ends an episode
