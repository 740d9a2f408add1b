"""Convergence in the physics timestep, with real MuJoCo.

Every task of the registry that declares a scripted reference (``Task.reference``) runs it at the
task's substeps and at 4 x those substeps (a subclass of the task with ``substeps`` multiplied;
the control rate stays the robot's): the episode must end the same way (success or not) and its
return stay within the tolerance the task declares (``Task.reference.return_tolerance``); a task
without a reference is skipped, saying so. Then the
controller side of substeps: the reference ramps within a control period, so more physics steps
per control step no longer cost tracking, and the rollout and Python paths stay bit-identical.

Measured (return at the task's substeps -> at 4 x; success the same in each; the other tasks'
references as they stood when this was written):

    ball_bouncing    4 -> 16   18.9631 -> 18.9730
    ball_in_cup      4 -> 16   4.3360 -> 1.150 at the 5 kN/m string: NOT converged (below)
    ball_on_beam     1 -> 4   -0.003881 -> -0.003887
    reach            1 -> 4   -0.477627 -> -0.477379
    casting          4 -> 16  -2.4840 -> -2.4880 (the reference now returns -2.656)
    pole_balancing   1 -> 4   -12.1633 -> -12.1746
    tetherball       4 -> 16  -0.025882 -> -0.025899
    ball_paddling    4 -> 16   15 -> 15            (peak string length 0.4647 -> 0.4658 m)
    beer_pong        4 -> 16  -0.010084 -> -0.015306

ball_in_cup's outcome is not converged at its step with its default string (5 kN/m, the stiffest
the 0.5 ms step holds stably, tasks/ball_in_cup.py): its reference swing, near the edge of the
catch region, catches at 0.5 ms and misses at 0.25 and 0.125 ms (4.336, 1.213, 1.150), and 1 of 6
swings perturbed by 0.03 rad ends differently at 0.25 and 0.125 ms. A 2 kN/m string at 0.25 ms
converges (4.338 against 4.343 at 0.125 ms, the 6 perturbed swings alike); a 0.67 kN/m string at
0.5 ms too (all alike, but the reference swing misses there). The outcome test is marked as the
known failure it is (strict: it fails once the default converges) and the string's stretch,
which does converge, is tested apart.
"""
from __future__ import annotations

from dataclasses import dataclass

import mujoco
import numpy as np
import pytest

from episodic.interface.commands import Feedforward
from episodic.interface.robot import load_robot
from episodic.interface.trajectory import Desired
from episodic.runtime.control import Gains
from episodic.runtime.runner import Runner
from episodic.runtime.scene import build_scene
from episodic.runtime.simulation import Simulation
from episodic.tasks import TASKS, reference_commands, registry
from tests.helpers import reference_cases

pytestmark = pytest.mark.slow  # each reference runs twice, once with 4 x the physics steps

FACTOR = 4
# |return at 4 x the substeps - return at the task's| allowed: each task's
# Task.reference.return_tolerance, small against the reference's return and at least 10 x the
# difference measured (module docstring), leaving room for the references being re-tuned.


# ball_in_cup's peak string stretch in its reference swing at 4 and 16 substeps: 1.15 and 1.62 mm
# with the 5 kN/m string (5.85 and 6.24 mm with the earlier 0.67 kN/m one, 5.3 and 6.1 mm at 2 and 8)
STRETCH_TOLERANCE = 0.0006  # m


REGISTRY = registry()


def finer(cls: type, factor: int = FACTOR) -> type:
    """The task class ``cls`` with ``factor`` times its physics steps per control step."""
    return dataclass(type(f"{cls.__name__}Finer", (cls,), {"substeps": cls.substeps * factor}))


def run_reference(task) -> tuple[bool, float, int, np.ndarray]:
    """Run the task's reference from a fresh runner: (success, episode return, substeps, the
    task state rows of its segments)."""
    with Runner(task, seed=0) as runner:
        replies = [runner.send(c) for c in reference_commands(REGISTRY[task.name])(runner.robot, 1)]
        assert all(r.flag == 0 for r in replies), [r.message for r in replies]
        episode = runner.episodes[-1]
        steps = episode.steps()
        return (bool(episode.success), float(episode.episode_return), runner.scene.substeps,
                steps["task_state"][steps["index"] >= 1])


@pytest.mark.parametrize("name", reference_cases(expect_convergence=True))
def test_the_reference_converges_in_the_timestep(name):
    cls = REGISTRY[name]
    success, value, substeps, state = run_reference(cls())
    success_fine, value_fine, substeps_fine, state_fine = run_reference(finer(cls)())
    assert substeps_fine == FACTOR * substeps
    assert success_fine == success, (value, value_fine)
    tolerance = cls.reference.return_tolerance
    assert value_fine == pytest.approx(value, abs=tolerance), (substeps, value, substeps_fine, value_fine)


def test_the_ball_in_cup_string_stretch_converges_in_the_timestep():
    """The string's peak stretch in the reference swing, what set the task's substeps, at the step
    and at a quarter of it."""
    cls = TASKS["ball_in_cup"]
    _, _, _, state = run_reference(cls())
    _, _, _, state_fine = run_reference(finer(cls)())
    column, length = cls.columns.index("string"), cls().string_length
    stretch, stretch_fine = state[:, column].max() - length, state_fine[:, column].max() - length
    assert stretch > 0.001, stretch
    assert stretch == pytest.approx(stretch_fine, abs=STRETCH_TOLERANCE), (stretch, stretch_fine)


# -- the controller between control ticks ----------------------------------------------------
def smooth_trajectory(robot, duration: float = 2.0) -> Desired:
    """Sines around home on every joint (0.3-0.45 rad, 0.5-1 Hz) with analytic qd, qdd;
    sample k is the desired state at t = k dt."""
    dt = robot.control_dt
    t = (np.arange(int(round(duration / dt))) * dt)[:, None]
    amp = np.array([0.4, 0.45, 0.3, 0.4, 0.3, 0.3, 0.3])
    w = 2 * np.pi * np.array([0.5, 0.6, 0.7, 0.5, 0.8, 0.9, 1.0])
    return Desired(robot.home + amp * np.sin(w * t), amp * w * np.cos(w * t), -amp * w**2 * np.sin(w * t))


def tracking(substeps: int, mode: Feedforward) -> tuple[np.ndarray, float]:
    """Joint positions (n + 1, 7) of the reach scene with ``substeps`` physics steps per control
    step tracking the smooth trajectory, and the tracking error max |q_k - q_d,k| rad (the
    state before step k against sample k)."""
    robot = load_robot("wam")
    sim = Simulation(build_scene(robot, finer(TASKS["reach"], substeps)()))
    desired = smooth_trajectory(robot)
    sim.reset(desired.q[0])
    sim.data.qvel[sim.scene.dof_adr] = desired.qd[0]
    mujoco.mj_forward(sim.model, sim.data)
    record = sim.run(desired, Gains(robot.kp, robot.kd, np.zeros(7), mode))
    q = sim.scene.qpos(record.state)[:, sim.scene.qpos_adr]
    return q, float(np.abs(q[:-1] - desired.q).max())


@pytest.mark.parametrize("mode", [Feedforward.FEEDFORWARD, Feedforward.GRAVITY_COMPENSATION])
def test_more_physics_steps_per_control_step_do_not_cost_tracking(mode):
    """With the reference held for a whole control period, 4 physics steps per control step
    tracked a smooth trajectory 3.5 times worse than 1 under feedforward (1.42 vs 0.41 mrad) and
    the motion drifted 1.5-1.6 mrad from the 1-step one in both modes; with it ramping (measured)
    4 steps track as well (0.33 vs 0.41 mrad) and follow the 1-step motion within 0.36-0.43 mrad."""
    q1, error1 = tracking(1, mode)
    q4, error4 = tracking(4, mode)
    assert error4 <= error1 * 1.02, (error1, error4)
    assert np.abs(q4 - q1).max() < 5e-4
    if mode == Feedforward.FEEDFORWARD:
        assert error1 < 1e-3  # the comparison is about tracking, not about a bad controller


@pytest.mark.parametrize("mode", [Feedforward.NONE, Feedforward.GRAVITY_COMPENSATION, Feedforward.FEEDFORWARD])
def test_rollout_and_python_paths_stay_bit_identical_with_substeps(mode):
    """The ramp within control steps is the same on both paths (ball_in_cup's scene, 4 physics
    steps per control step; ki = 1e-300 sends run() down the Python path without changing a
    ctrl value)."""
    robot = load_robot("wam")
    scene = build_scene(robot, TASKS["ball_in_cup"]())
    assert scene.substeps > 1
    desired = smooth_trajectory(robot, duration=0.4)
    desired = Desired(desired.q + (TASKS["ball_in_cup"]().start_posture(robot) - robot.home), desired.qd, desired.qdd)
    records, ends = [], []
    for ki in (0.0, 1e-300):
        sim = Simulation(scene)
        sim.reset(desired.q[0])
        gains = Gains(robot.kp, robot.kd, np.full(7, ki), mode)
        assert gains.state_dependent == (ki > 0)
        records.append(sim.run(desired, gains))
        ends.append(sim.get_state())
    fast, slow = records
    assert np.array_equal(fast.state, slow.state)
    assert np.array_equal(fast.sensordata, slow.sensordata)
    assert np.array_equal(fast.u_ff, slow.u_ff)
    assert np.array_equal(ends[0], ends[1])
    moved = scene.qpos(fast.state)[:, scene.qpos_adr]
    assert np.abs(moved[-1] - moved[0]).max() > 0.05  # the arm moved: the comparison is not idle
