"""The start routine (episodic.runtime.start) on real MuJoCo: the go-to-start reaches its posture
close and slow and hands its steps over in one piece; the exact start puts the simulation at rest
exactly at the posture; which backends can start exactly."""
from __future__ import annotations

import numpy as np
import pytest

from episodic.interface.commands import Feedforward
from episodic.interface.robot import load_robot
from episodic.runtime.backend import DriverBackend, MujocoDriver
from episodic.runtime.control import Gains
from episodic.runtime.pacing import Pacer
from episodic.runtime.scene import build_scene
from episodic.runtime.simulation import Simulation, StepRecord
from episodic.runtime.start import go_to_start, restart_exactly
from episodic.tasks import make_task

ROBOT = load_robot("wam")
TARGET = ROBOT.home + np.linspace(0.3, -0.2, ROBOT.n_dofs)
GAINS = Gains(ROBOT.kp, ROBOT.kd, np.zeros(ROBOT.n_dofs), Feedforward.GRAVITY_COMPENSATION)
NONE_PASSIVE = np.zeros(ROBOT.n_dofs, bool)


@pytest.fixture
def sim() -> Simulation:
    s = Simulation(build_scene(ROBOT, make_task("reach")))
    s.reset(ROBOT.home)
    return s


def test_the_go_to_start_ends_close_and_slow_and_is_handed_over_in_one_piece(sim):
    got: list[StepRecord] = []
    go_to_start(sim, sim.scene, TARGET, GAINS, NONE_PASSIVE, None, got.append)
    (record,) = got
    goto = ROBOT.goto
    assert np.max(np.abs(sim.q - TARGET)) < goto.tolerance_q and np.max(np.abs(sim.qd)) < goto.tolerance_qd
    np.testing.assert_array_equal(sim.scene.joint_positions(record.state[-1:])[0], sim.q)  # all that ran
    np.testing.assert_allclose(record.desired.q[0], ROBOT.home, atol=1e-3)  # a move from where the robot was
    np.testing.assert_array_equal(record.desired.q[-1], TARGET)  # ending held at the target
    assert len(record) <= (goto.settle_time + 10) * ROBOT.control_rate


def test_a_passive_joint_is_neither_moved_nor_waited_for(sim):
    passive = NONE_PASSIVE.copy()
    passive[2] = True
    got: list[StepRecord] = []
    go_to_start(sim, sim.scene, TARGET, GAINS.with_passive(passive), passive, None, got.append)
    (record,) = got
    moving = len(record) - np.sum(np.all(record.desired.q == TARGET, axis=1))  # the move, before the holds
    assert moving > 0
    np.testing.assert_array_equal(record.desired.q[:moving, 2], ROBOT.home[2])  # not moved by the min-jerk


def test_at_the_target_already_only_the_check_runs(sim):
    sim.reset(TARGET)
    got: list[StepRecord] = []
    go_to_start(sim, sim.scene, TARGET, GAINS, NONE_PASSIVE, None, got.append)
    assert got == []  # at rest there: no move, no hold


def test_an_interruption_ends_a_paced_go_to_start_at_the_next_tick():
    sim = Simulation(build_scene(ROBOT, make_task("reach")), Pacer(ROBOT.control_dt))
    sim.reset(ROBOT.home)
    got: list[StepRecord] = []
    go_to_start(sim, sim.scene, TARGET, GAINS, NONE_PASSIVE, lambda: True, got.append)
    (record,) = got
    assert len(record) == 1


def test_the_exact_start_is_at_rest_exactly_at_the_target_and_the_log_ends_at_it(sim):
    got: list[StepRecord] = []
    sim.data.time = 12.5  # as if earlier episodes ran
    go_to_start(sim, sim.scene, TARGET, GAINS, NONE_PASSIVE, None, got.append)
    reached, end = sim.get_state(), sim.data.time
    blocks = [{"time": got[0].state[:-1, 0]}]
    settled = restart_exactly(sim, TARGET, GAINS, blocks)
    np.testing.assert_array_equal(settled, reached)
    np.testing.assert_array_equal(sim.q, TARGET)
    np.testing.assert_array_equal(sim.qd, np.zeros(ROBOT.n_dofs))
    assert sim.data.time == 0.0 and not np.any(sim.data.qacc_warmstart)
    np.testing.assert_array_equal(blocks[0]["time"], got[0].state[:-1, 0] - end)
    assert blocks[0]["time"][-1] == pytest.approx(-ROBOT.control_dt)
    act = sim.scene.actuator
    np.testing.assert_array_equal(sim.model.actuator_biasprm[act, 1], -GAINS.kp)  # the gains of the move


def test_only_a_blocking_simulation_can_start_exactly():
    scene = build_scene(ROBOT, make_task("reach"))
    assert Simulation(scene).can_start_exactly
    assert not Simulation(scene, Pacer(ROBOT.control_dt)).can_start_exactly
    assert not DriverBackend(scene, MujocoDriver(scene)).can_start_exactly
