"""The step recorder (episodic.runtime.recorder) on real MuJoCo runs: a run measured once, cut
as measured, and the log rows built from it in the log's dtypes."""
from __future__ import annotations

import numpy as np
import pytest

from episodic.interface.columns import STEP_DTYPES
from episodic.interface.commands import Feedforward
from episodic.interface.robot import load_robot
from episodic.interface.trajectory import min_jerk
from episodic.interface.vocabulary import MachineState
from episodic.logs.episode import EpisodeBuffer
from episodic.runtime.control import Gains
from episodic.runtime.recorder import StepRecorder
from episodic.runtime.scene import build_scene
from episodic.runtime.simulation import Simulation, StepRecord
from episodic.tasks import make_task

ROBOT = load_robot("wam")


@pytest.fixture(scope="module")
def run() -> tuple[StepRecorder, StepRecord]:
    """A recorder of the reach task and a 200-step move of the WAM."""
    task = make_task("reach")
    scene = build_scene(ROBOT, task)
    sim = Simulation(scene)
    sim.reset(ROBOT.home)
    task.reset(sim.model, sim.data, np.array([0.3, 0.4, 1.4]), np.random.default_rng(0))
    gains = Gains(ROBOT.kp, ROBOT.kd, np.zeros(ROBOT.n_dofs), Feedforward.GRAVITY_COMPENSATION)
    record = sim.run(min_jerk(ROBOT.home, ROBOT.home + 0.2, 200 * ROBOT.control_dt, ROBOT.control_dt), gains)
    return StepRecorder(scene, sim, task), record


def episode() -> EpisodeBuffer:
    return EpisodeBuffer(0, 1, np.zeros(1), (0, 0), ("x",))


def test_a_measurement_holds_the_view_the_task_state_and_the_joint_velocities(run):
    recorder, record = run
    scene, task = recorder.scene, recorder.task
    steps = recorder.measure(record)
    n = len(record)
    assert len(steps) == n == 200
    np.testing.assert_array_equal(steps.view.qpos, scene.qpos(record.state[:-1]))
    np.testing.assert_array_equal(steps.view.u, scene.applied_torque(record.sensordata))
    np.testing.assert_array_equal(steps.view.ee_pos, scene.sensor(record.sensordata, "ee_pos"))
    assert steps.qd.shape == (n + 1, ROBOT.n_dofs)
    np.testing.assert_array_equal(steps.qd, scene.joint_velocities(record.state))
    np.testing.assert_array_equal(steps.task_state, task.state(steps.view))


def test_a_cut_measurement_is_the_measurement_of_the_cut_run(run):
    recorder, record = run
    cut = recorder.measure(record).truncate(73)
    again = recorder.measure(record.truncate(73))
    assert len(cut) == 73
    for name in ("qpos", "qvel", "sensordata", "u", "ee_pos"):
        np.testing.assert_array_equal(getattr(cut.view, name), getattr(again.view, name))
    np.testing.assert_array_equal(cut.qd, again.qd)
    np.testing.assert_array_equal(cut.task_state, again.task_state)
    np.testing.assert_array_equal(cut.record.state, again.record.state)


def test_rows_have_every_log_column_in_its_dtype_and_number_the_steps_of_a_command(run):
    recorder, record = run
    ep = episode()
    recorder.step_in_command = 0
    rewards = -np.arange(len(record), dtype=float)
    recorder.append(ep, recorder.measure(record), MachineState.DO_MOTION, 2, rewards)
    recorder.append(ep, recorder.measure(record.truncate(10)), MachineState.WAIT_FOR_COMMAND, 2)
    first, second = ep.blocks
    assert set(first) == set(STEP_DTYPES)
    for name, dtype in STEP_DTYPES.items():
        assert first[name].dtype == np.dtype(dtype), name
    assert first["step"].tolist() == list(range(200)) and second["step"].tolist() == list(range(200, 210))
    assert set(first["machine_state"]) == {MachineState.DO_MOTION}
    assert set(second["machine_state"]) == {MachineState.WAIT_FOR_COMMAND}
    assert set(first["index"]) == {2}
    np.testing.assert_array_equal(first["reward"], rewards)
    np.testing.assert_array_equal(second["reward"], np.zeros(10))
    np.testing.assert_array_equal(first["time"], record.state[:-1, 0])
    qd = recorder.scene.joint_velocities(record.state)
    np.testing.assert_array_equal(first["qdd"], np.diff(qd, axis=0) / ROBOT.control_dt)
    np.testing.assert_array_equal(first["q_d"], ROBOT.clamp(record.desired.q))


def test_an_empty_run_adds_no_block(run):
    recorder, record = run
    ep = episode()
    recorder.append(ep, recorder.measure(record.truncate(0)), MachineState.DO_MOTION, 1)
    assert ep.blocks == []


def test_the_task_state_now_is_worked_out_once_per_state(run):
    recorder, _ = run
    sim = recorder.sim
    before = recorder.current_task_state()
    sim.data.qpos[sim.scene.qpos_adr] += 0.3  # changed without telling: the cached state stays
    np.testing.assert_array_equal(recorder.current_task_state(), before)
    sim.touch()
    after = recorder.current_task_state()
    assert not np.array_equal(after, before)
    after[:] = np.nan  # a copy: the cache is not the caller's
    assert np.all(np.isfinite(recorder.current_task_state()))


def test_a_view_of_rows_reads_the_states_given(run):
    recorder, record = run
    rows = slice(50, 60)
    view = recorder.view(record.state[rows], record.sensordata[rows])
    np.testing.assert_array_equal(view.qpos, recorder.measure(record).view.qpos[rows])
    assert view.dt == ROBOT.control_dt and len(view.u) == 10
