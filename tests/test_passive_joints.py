"""Passive joints and joint failures with real MuJoCo: a joint a task leaves passive
(``Task.passive_joints``), or one that fails during an episode (``Task.joint_failures``), gets no
torque at all in every step, in the compiled loop, the per-tick Python loop and on a driven robot,
and moves freely under gravity; GOTO_START neither drives nor waits for it; a run that straddles
a failure is split there, and replays bit-identically."""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import mujoco
import numpy as np
import pytest

from episodic.interface.commands import GainsCommand, StartCommand, TrajectoryCommand
from episodic.interface.robot import load_robot
from episodic.interface.trajectory import min_jerk, min_jerk_duration
from episodic.interface.vocabulary import Flag
from episodic.logs import read_episodes
from episodic.runtime.backend import MujocoDriver
from episodic.runtime.runner import Runner
from episodic.runtime.scene import build_scene
from episodic.task import Task
from episodic.tasks import make_task
from episodic.tools.replay import replay
from tests.helpers import run_commands, wave

ROBOT = load_robot("wam")
LIMP_AT = 5  # the WAM's j6: at the robot's home posture gravity turns the hand down
LIMP = ROBOT.joint_names[LIMP_AT]
PATHS = {"compiled": dict(feedforward="gravity_compensation"),  # plant gravity compensation, in C
         "compiled_inverse": dict(feedforward="inverse_dynamics"),  # inverse dynamics at the measured state, in C
         # a feedback law written in Python: the per-tick Python loop
         "python": dict(feedforward="inverse_dynamics", task_gains=np.zeros(1))}


def limp(passive=(), failures=None) -> Task:
    """A task with no scene of its own whose ``passive`` joints are passive and whose joints
    ``failures`` (name -> s after the motion starts) fail."""

    @dataclass
    class Limp(Task):
        name: ClassVar[str] = "limp"
        columns: ClassVar[tuple[str, ...]] = ("hand_z",)
        gains_help: ClassVar[str] = "[any] (a feedback law written in Python that leaves q_d as it is)"
        passive_joints: ClassVar[tuple[str, ...]] = tuple(passive)

        def feedback(self, model, data, task_gains):
            return np.zeros(ROBOT.n_dofs)

        def joint_failures(self, robot):
            return dict(failures or {})

        def state(self, steps):
            return steps.ee_pos[:, 2:]

    return Limp()


def hold(episode_id: int, index: int, n: int, seconds: float, **kw) -> GainsCommand:
    return GainsCommand(episode_id, index, n, ROBOT.kp, ROBOT.kd, wait_time=seconds, **kw)


@pytest.mark.parametrize("path", PATHS)
def test_a_passive_joint_gets_no_torque_in_any_step_and_falls_freely(path):
    with Runner(limp([LIMP])) as r:
        move = wave(ROBOT.home, n=250, amplitude=0.1)  # from the start posture, the robot's home
        replies, _, steps = run_commands(r, [StartCommand(1, 2), TrajectoryCommand(1, 1, 2, move),
                                             hold(1, 2, 2, 0.5, **PATHS[path])])
        dof = r.scene.dof_adr[LIMP_AT]
        assert r.sim.data.qfrc_actuator[dof] == 0.0 and r.sim.data.actuator_force[r.scene.actuator[LIMP_AT]] == 0.0
    assert [reply.flag for reply in replies] == [Flag.OK] * 3
    u = steps["u"]  # the joint torque sensors u/<joint>, N m
    assert u.shape == (len(steps["time"]), ROBOT.n_dofs) and steps["q"].shape == u.shape
    assert np.all(u[:, LIMP_AT] == 0.0) and np.all(steps["u_ff"][:, LIMP_AT] == 0.0)
    driven = np.delete(np.arange(ROBOT.n_dofs), LIMP_AT)
    assert np.all(np.abs(u[:, driven]).max(axis=0) > 0)
    # with no torque the hand swings down, far from where it is told to be
    motion = steps["index"] >= 1
    assert np.max(np.abs(steps["q"][motion, LIMP_AT] - steps["q_d"][motion, LIMP_AT])) > 0.3


def test_goto_start_neither_drives_nor_waits_for_a_passive_joint():
    base = 0  # the base joint, which gravity does not turn: left passive it stays where it is
    target = ROBOT.home + 0.3
    with Runner(limp([ROBOT.joint_names[base]])) as r:
        r.machine.skip_goto_start = False  # the go-to-start simulated (episodic.runtime.start)
        reply = r.send(StartCommand(1, 1, posture=target))
        steps = r.get_episode()
        # where the go-to-start really ended (the simulation then starts exactly at the posture)
        q = r.sim.scene.qpos(r.machine.settled_state)[r.sim.scene.qpos_adr]
        assert np.array_equal(r.sim.q, target)
    assert reply.flag == Flag.OK
    np.testing.assert_array_equal(reply.posture, target)  # the held posture, where a segment starts
    driven = np.arange(1, ROBOT.n_dofs)
    assert np.max(np.abs(q[driven] - target[driven])) < ROBOT.goto.tolerance_q
    assert abs(q[base] - target[base]) > 0.29 and np.all(steps["u"][:, base] == 0.0)
    goal = np.where(np.arange(ROBOT.n_dofs) == base, ROBOT.home, target)
    planned = int(round(min_jerk_duration(ROBOT.home, goal, ROBOT.goto.max_velocity, ROBOT.goto.max_acceleration)
                        * ROBOT.control_rate))
    # waiting for the base joint would have held on for the whole settle time (settle_time s)
    assert len(steps["time"]) < planned + 0.8 * ROBOT.goto.settle_time * ROBOT.control_rate


def test_a_segment_may_start_anywhere_on_a_passive_joint():
    with Runner(limp([LIMP])) as r:
        start = r.send(StartCommand(1, 1))
        q = np.repeat(start.posture[None], 50, axis=0)
        q[:, LIMP_AT] += 1.0  # far beyond max_start_jump: refused on a driven joint
        assert r.send(TrajectoryCommand(1, 1, 1, q)).flag == Flag.OK
    with Runner(limp()) as r:
        r.send(StartCommand(1, 1))
        assert r.send(TrajectoryCommand(1, 1, 1, q)).flag == Flag.DISCONTINUOUS


def test_the_passive_actuator_has_no_gain_no_bias_and_an_empty_force_range():
    scene = build_scene(ROBOT, limp([LIMP]))
    model, act, joint = scene.model, scene.actuator[LIMP_AT], scene.joint[LIMP_AT]
    assert scene.passive.tolist() == [i == LIMP_AT for i in range(ROBOT.n_dofs)]
    assert model.actuator_gainprm[act, 0] == 0.0 and np.all(model.actuator_biasprm[act, :3] == 0.0)
    np.testing.assert_array_equal(model.jnt_actfrcrange[joint], [0.0, 0.0])
    # the range is what removes gravity compensation: MuJoCo routes the joint's share of it
    # through the actuator and clips the sum to the range
    data = mujoco.MjData(model)
    data.qpos[scene.qpos_adr] = ROBOT.home
    mujoco.mj_forward(model, data)
    dof = scene.dof_adr[LIMP_AT]
    assert abs(data.qfrc_gravcomp[dof]) > 0.01 and data.qfrc_actuator[dof] == 0.0 and data.qfrc_passive[dof] == 0.0
    with pytest.raises(ValueError, match="no joint 'wrist'"):
        build_scene(ROBOT, limp(["wrist"]))


@pytest.mark.parametrize("path", PATHS)
def test_a_joint_fails_at_its_time_during_a_segment(path):
    """Failing 0.5 s after the motion starts, inside a 1 s hold: tracked and powered before,
    no torque from that step on, then falling."""
    with Runner(limp(failures={LIMP: 0.5})) as r:
        replies, _, steps = run_commands(r, [StartCommand(1, 1), hold(1, 1, 1, 1.0, **PATHS[path])])
    assert replies[-1].flag == Flag.OK
    motion = steps["index"] == 1
    u, q, q_d = steps["u"][motion, LIMP_AT], steps["q"][motion, LIMP_AT], steps["q_d"][motion, LIMP_AT]
    fail = int(round(0.5 * ROBOT.control_rate))
    assert np.all(u[:fail] != 0.0)  # holding the hand up against gravity
    assert np.max(np.abs(q[:fail] - q_d[:fail])) < 0.01
    assert np.all(u[fail:] == 0.0) and np.all(steps["u_ff"][motion, LIMP_AT][fail:] == 0.0)
    assert abs(q[-1] - q[fail]) > 0.3  # the hand falls


def test_a_failure_at_a_segment_boundary_and_the_next_episode():
    """A failure due where a segment ends leaves the next segment passive; the next episode
    drives the joint again (GOTO_START lifts the hand back) until the failure is due again."""
    with Runner(limp(failures={LIMP: 0.2})) as r:
        r.machine.skip_goto_start = False  # the go-to-start simulated (episodic.runtime.start)
        replies, _, steps = run_commands(r, [StartCommand(1, 2), hold(1, 1, 2, 0.2), hold(1, 2, 2, 0.3)])
        first = steps["u"][steps["index"] == 1, LIMP_AT]
        second = steps["u"][steps["index"] == 2, LIMP_AT]
        _, _, again = run_commands(r, [StartCommand(2, 1), hold(2, 1, 1, 0.15)])
    assert replies[-1].flag == Flag.OK and first.size == 100 and second.size == 150
    assert np.all(first != 0.0) and np.all(second == 0.0)
    assert np.all(again["u"][again["index"] == 1, LIMP_AT] != 0.0)
    np.testing.assert_allclose(again["q"][again["index"] == 0][-1], ROBOT.home, atol=ROBOT.goto.tolerance_q)


@pytest.mark.parametrize("fail_time", [0.0, 0.25])
def test_a_failure_in_a_blocking_run_replays_bit_identically(tmp_path, fail_time):
    """A registered task's failure (pole_balancing: j7 passive, fail_joint = 6) at the motion's
    start or inside a segment run in one piece, then under inverse dynamics at the measured state."""
    task = make_task("pole_balancing", {"fail_joint": 6, "fail_time": fail_time})
    posture = task.start_posture(ROBOT)
    move = min_jerk(posture, posture + 0.05, 0.4, ROBOT.control_dt).q
    commands = [StartCommand(1, 3), TrajectoryCommand(1, 1, 3, move, wait_time=0.1),
                hold(1, 2, 3, 0.2, feedforward="inverse_dynamics"), hold(1, 3, 3, 0.2)]
    with Runner(task, log=tmp_path / "failure.h5") as r:
        assert [r.send(c).flag for c in commands] == [Flag.OK] * 4
    (stored,) = read_episodes(tmp_path / "failure.h5")
    u = stored.steps["u"][stored.steps["index"] >= 1]
    fail = int(round(fail_time * ROBOT.control_rate))
    assert np.all(u[:fail, 5] != 0.0) and np.all(u[fail:, 5] == 0.0) and np.all(u[:, 6] == 0.0)
    report = replay(tmp_path / "failure.h5")
    assert report.identical and report.episodes == ["000000"], report.differences


def test_a_failure_on_a_driven_robot():
    """Through DriverBackend the failed joint is sent kp = kd = 0 and no feedforward, so the
    driver applies no torque either."""
    with Runner(limp(failures={LIMP: 0.1}), driver=MujocoDriver) as r:
        replies, _, steps = run_commands(r, [StartCommand(1, 1), hold(1, 1, 1, 0.4)])
    assert replies[-1].flag == Flag.OK
    u = steps["u"][steps["index"] == 1, LIMP_AT]
    assert np.all(u[1:50] != 0.0) and np.all(u[51:] == 0.0)  # u is what the driver applied the tick before
