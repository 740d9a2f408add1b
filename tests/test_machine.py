"""The episode state machine against real MuJoCo: order, flags, goto-start, gains, safety."""
from __future__ import annotations

import ast
import logging
from pathlib import Path

import numpy as np
import pytest

from episodic.interface.commands import Feedforward, GainsCommand, ResetCommand, StartCommand, TrajectoryCommand
from episodic.interface.trajectory import min_jerk
from episodic.runtime import machine as machine_module
from episodic.runtime.machine import HELD_BLOCK, Flag, MachineState
from episodic.runtime.runner import Runner, StepCursor
from episodic.runtime.scene import _columns, _take
from episodic.tasks import TASKS, make_task
from tests.helpers import run_episode, wave


def test_three_segment_episode_runs_in_order(runner):
    replies = run_episode(runner, 1)
    assert [r.flag for r in replies] == [Flag.OK] * 4
    assert [r.episode_done for r in replies] == [False, False, False, True]
    assert all(r.n_steps == 500 for r in replies[1:])
    assert all(r.reward < 0 for r in replies[1:])
    (ep,) = runner.episodes
    assert ep.flag == Flag.OK
    assert ep.episode_return == pytest.approx(sum(r.reward for r in replies[1:]))
    steps = ep.steps()
    motion = steps["machine_state"] == MachineState.DO_MOTION
    assert motion.sum() == 1500
    assert list(np.unique(steps["index"][motion])) == [1, 2, 3]
    np.testing.assert_allclose(replies[-1].state[:3], [0.5, 0.2, 1.5])
    assert runner.machine.state == MachineState.RESTART


def test_bad_command_between_two_good_episodes(runner):
    first = run_episode(runner, 1)
    bad = runner.send(TrajectoryCommand(1, 1, 3, wave(runner.robot.home)))
    nan_q = wave(runner.robot.home)
    nan_q[3, 2] = np.nan
    garbage = runner.send(TrajectoryCommand(2, 1, 3, nan_q))
    second = run_episode(runner, 2)
    assert all(r.flag == Flag.OK for r in first + second)
    assert bad.flag == Flag.OUT_OF_ORDER and "send index 0" in bad.message
    assert garbage.flag == Flag.INVALID_PAYLOAD and "NaN" in garbage.message
    assert [ep.flag for ep in runner.episodes] == [Flag.OK, Flag.OK]


@pytest.mark.parametrize("make, flag", [
    (lambda h: TrajectoryCommand(1, 2, 3, wave(h)), Flag.OUT_OF_ORDER),
    (lambda h: TrajectoryCommand(1, 1, 4, wave(h)), Flag.OUT_OF_ORDER),
    (lambda h: TrajectoryCommand(99, 1, 3, wave(h)), Flag.STALE_EPISODE),
    (lambda h: TrajectoryCommand(1, 1, 3, wave(h)[:, :6]), Flag.INVALID_PAYLOAD),
    (lambda h: "not a command", Flag.INVALID_PAYLOAD),
    (lambda h: ResetCommand(1), Flag.ABORTED_BY_LEARNER),
])
def test_errors_abort_the_episode_and_the_next_one_works(runner, make, flag):
    assert runner.send(StartCommand(1, 3)).flag == Flag.OK
    reply = runner.send(make(runner.robot.home))
    assert reply.flag == flag and reply.episode_done and reply.message
    assert runner.machine.state == MachineState.RESTART
    assert [r.flag for r in run_episode(runner, 2)] == [Flag.OK] * 4
    assert [ep.flag for ep in runner.episodes] == [flag, Flag.OK]
    assert len(runner.episodes[0].commands) == 2  # the bad command is kept for replay


def test_new_start_aborts_the_running_episode(runner):
    runner.send(StartCommand(1, 3))
    runner.send(TrajectoryCommand(1, 1, 3, wave(runner.robot.home)))
    assert runner.send(StartCommand(2, 1)).flag == Flag.OK
    assert runner.episodes[0].flag == Flag.ABORTED_BY_LEARNER
    assert runner.episodes[0].n_steps == 500


def test_index_after_the_last_is_refused(runner):
    run_episode(runner, 1, n_segments=1)
    reply = runner.send(TrajectoryCommand(1, 2, 1, wave(runner.robot.home)))
    assert reply.flag == Flag.OUT_OF_ORDER
    assert len(runner.episodes) == 1


def test_goto_start_is_smooth_and_reaches_the_posture(runner):
    robot = runner.robot
    target = robot.home + np.array([0.4, -0.3, 0.5, -0.4, 0.6, 0.3, -0.5])
    runner.machine.skip_goto_start = False  # the go-to-start simulated (episodic.runtime.start)
    reply = runner.send(StartCommand(1, 1, posture=target))
    assert reply.flag == Flag.OK and reply.n_steps > 0
    np.testing.assert_allclose(runner.sim.q, target, atol=robot.goto.tolerance_q)
    assert np.max(np.abs(runner.sim.qd)) < robot.goto.tolerance_qd
    runner.send(ResetCommand(1))
    steps = runner.episodes[0].steps()
    goto = steps["machine_state"] == MachineState.GOTO_START
    assert goto.all()
    # the plan respects the goto bounds; the measured motion stays close to it
    assert np.all(np.abs(steps["qd_d"]) <= robot.goto.max_velocity * 1.001)
    assert np.all(np.abs(steps["qdd_d"]) <= robot.goto.max_acceleration * 1.01)
    assert np.all(np.abs(steps["qd"]) <= robot.goto.max_velocity * 1.2 + 0.05)


def test_the_go_to_start_and_its_holds_are_one_block_of_steps(runner):
    """The move and the holds until the robot settles reach the episode's per-step blocks (what
    the log and the bridge's log block copy) in one piece, numbered 0..n-1, ending at time 0."""
    target = runner.robot.home + 0.3
    runner.machine.skip_goto_start = False  # the go-to-start simulated (episodic.runtime.start)
    reply = runner.send(StartCommand(1, 1, posture=target))
    (block,) = runner.machine.last_episode.blocks
    n = len(block["time"])
    assert n == reply.n_steps and n > int(0.05 * runner.control_rate)  # longer than one hold
    np.testing.assert_array_equal(block["step"], np.arange(n))
    assert block["time"][-1] == pytest.approx(-1 / runner.control_rate)
    assert all(np.shape(column)[0] == n for column in block.values())


def test_start_posture_outside_range_and_bad_context_are_invalid(runner):
    posture = runner.robot.home.copy()
    posture[0] = 10.0
    reply = runner.send(StartCommand(1, 1, posture=posture))
    assert reply.flag == Flag.INVALID_PAYLOAD and "range" in reply.message
    reply = runner.send(StartCommand(2, 1, context=np.ones(5)))
    assert reply.flag == Flag.INVALID_PAYLOAD and "target" in reply.message
    assert runner.episodes[-1].flag == Flag.INVALID_PAYLOAD


def test_gain_set_applies_to_following_segments(runner):
    home = runner.robot.home
    errors = []
    for episode_id, scale in ((1, 1.0), (2, 0.2)):
        runner.send(StartCommand(episode_id, 2))
        kp, kd = runner.robot.kp * scale, runner.robot.kd * scale
        gains = runner.send(GainsCommand(episode_id, 1, 2, kp, kd, feedforward=Feedforward.GRAVITY_COMPENSATION,
                                           wait_time=0.1))
        assert gains.flag == Flag.OK and gains.n_steps == 50
        runner.send(TrajectoryCommand(episode_id, 2, 2, wave(home, amplitude=0.4)))
        steps = runner.episodes[-1].steps()
        seg = steps["index"] == 2
        errors.append(np.abs(steps["q"][seg] - steps["q_d"][seg]).max())
    assert errors[1] > 2 * errors[0]


def test_trajectory_at_another_rate_is_resampled(runner):
    runner.send(StartCommand(1, 1))
    q = wave(runner.robot.home, n=101)
    reply = runner.send(TrajectoryCommand(1, 1, 1, q, rate=100.0, wait_time=0.2))
    assert reply.flag == Flag.OK
    assert reply.n_steps == 501 + 100
    steps = runner.episodes[0].steps()
    seg = steps["index"] == 1
    np.testing.assert_allclose(steps["q_d"][seg][::5][:101], q, atol=1e-12)


def test_velocity_over_the_limit_aborts_with_the_safety_flag(runner):
    home = runner.robot.home
    runner.send(StartCommand(1, 2))
    jump = np.repeat(home[None], 400, axis=0)
    jump[10:, 0] += 1.5  # a step of 1.5 rad on joint 1: the PD drives it past its velocity limit
    reply = runner.send(TrajectoryCommand(1, 1, 2, jump))
    assert reply.flag == Flag.SAFETY_ABORT and "j1" in reply.message
    np.testing.assert_array_equal(reply.posture, runner.robot.clamp(runner.sim.q))  # held where it stopped
    assert 0 < reply.n_steps < 400 and reply.episode_done
    ep = runner.episodes[0]
    assert ep.flag == Flag.SAFETY_ABORT
    qd = ep.steps()["qd"]
    assert np.all(np.abs(qd) <= runner.robot.velocity_limit)  # every logged step was within limits
    assert np.abs(runner.sim.qd[0]) > runner.robot.velocity_limit[0]  # the step that tripped it
    assert [r.flag for r in run_episode(runner, 2)] == [Flag.OK] * 4


def test_same_commands_give_bit_identical_episodes():
    from episodic.runtime.runner import Runner
    from episodic.tasks import make_task

    results = []
    for _ in range(2):
        with Runner(make_task("reach")) as r:
            run_episode(r, 1)
            results.append(r.episodes[0].steps())
    for name in results[0]:
        assert results[0][name].tobytes() == results[1][name].tobytes(), name


def test_idle_holds_the_posture_and_logs_the_steps(runner):
    runner.send(StartCommand(1, 1))
    q0 = runner.sim.q
    runner.machine.idle(500)
    np.testing.assert_allclose(runner.sim.q, q0, atol=1e-3)
    runner.send(ResetCommand(1))
    steps = runner.episodes[0].steps()
    assert (steps["machine_state"] == MachineState.WAIT_FOR_START).sum() == 500


def test_a_long_hold_is_logged_while_it_lasts(runner):
    """Held steps are logged a HELD_BLOCK at a time while the robot holds, so the tick a
    command arrives on logs at most one block, whatever the length of the wait."""
    runner.send(StartCommand(1, 1))
    block = int(HELD_BLOCK * runner.control_rate)
    for _ in range(3 * block + 7):
        runner.idle(1)
    _, blocks = runner.steps_since(StepCursor())
    held = [len(b["time"]) for b in blocks if b["machine_state"][0] == MachineState.WAIT_FOR_START]
    assert held == [block] * 3
    runner.send(ResetCommand(1))
    steps = runner.episodes[0].steps()
    assert (steps["machine_state"] == MachineState.WAIT_FOR_START).sum() == 3 * block + 7
    assert (np.diff(steps["time"]) > 0).all()


def test_task_gains_for_a_task_without_feedback_law_are_invalid(runner):
    runner.send(StartCommand(1, 1))
    robot = runner.robot
    reply = runner.send(GainsCommand(1, 1, 1, robot.kp, robot.kd, task_gains=np.ones(2)))
    assert reply.flag == Flag.INVALID_PAYLOAD and "no feedback law" in reply.message


def test_a_task_feedback_law_shapes_the_desired_posture():
    """A task whose feedback law offsets joint 1 by task_gains[0] rad: the logged q_d carries the
    offset, the arm follows it, and the posture held afterwards does not accumulate it."""
    from dataclasses import dataclass

    from episodic.runtime.runner import Runner
    from episodic.task import TaskError
    from episodic.tasks.reach import Reach

    @dataclass
    class OffsetJoint1(Reach):
        name = "offset_joint1"
        gains_help = "one value: offset of joint 1, rad"

        def check_gains(self, task_gains):
            if task_gains.size != 1:
                raise TaskError("one value")

        def feedback(self, model, data, task_gains):
            out = np.zeros(7)
            out[0] = task_gains[0]
            return out

    with Runner(OffsetJoint1()) as r:
        robot = r.robot
        r.send(StartCommand(1, 3))
        assert r.send(GainsCommand(1, 1, 3, robot.kp, robot.kd, task_gains=[0.2], wait_time=1.0)).flag == Flag.OK
        assert r.send(GainsCommand(1, 2, 3, robot.kp, robot.kd, task_gains=[0.2], wait_time=1.0)).flag == Flag.OK
        reply = r.send(GainsCommand(1, 3, 3, robot.kp, robot.kd, task_gains=np.ones(3)))
        assert reply.flag == Flag.INVALID_PAYLOAD
        steps = r.episodes[0].steps()
    held = steps["index"] == 2
    np.testing.assert_allclose(steps["q_d"][held][:, 0], robot.home[0] + 0.2)
    assert abs(steps["q"][held][-1, 0] - (robot.home[0] + 0.2)) < 2e-3


def test_segment_far_from_the_held_posture_is_refused(runner):
    home = runner.robot.home
    runner.send(StartCommand(1, 2))
    far = wave(home) + np.array([0, 0, 0.3, 0, 0, 0, 0])
    reply = runner.send(TrajectoryCommand(1, 1, 2, far))
    assert reply.flag == Flag.DISCONTINUOUS and "j3" in reply.message and reply.n_steps == 0
    assert runner.episodes[0].flag == Flag.DISCONTINUOUS
    # the message and the reply say where to start: the posture held
    np.testing.assert_array_equal(reply.posture, home)
    assert f"start it at the held posture {(np.round(home, 4) + 0.0).tolist()} rad" in reply.message
    # a segment that starts where the held posture is, within the allowance, runs
    runner.send(StartCommand(2, 1))
    near = wave(home) + np.array([0, 0, 0.09, 0, 0, 0, 0])
    assert runner.send(TrajectoryCommand(2, 1, 1, near)).flag == Flag.OK


def test_after_a_safety_abort_the_robot_holds_under_gravity_compensation(runner):
    home = runner.robot.home
    runner.send(StartCommand(1, 1))
    jump = np.repeat(home[None], 400, axis=0)
    jump[10:, 0] += 1.5
    assert runner.send(TrajectoryCommand(1, 1, 1, jump)).flag == Flag.SAFETY_ABORT
    gains = runner.machine._gains
    assert gains.feedforward == Feedforward.GRAVITY_COMPENSATION and not gains.ki.any()
    q_abort = runner.sim.q
    runner.machine.idle(1000)  # what a non-blocking runner does while it waits
    assert np.abs(runner.sim.qd).max() < 0.05
    assert np.abs(runner.sim.q - q_abort).max() < 0.3  # braked where it was, not driven back


@pytest.mark.parametrize("bad", ["discontinuous", "task_gains"])
def test_a_refused_segment_is_stored_once_and_replays(tmp_path, bad):
    from episodic.runtime.runner import Runner
    from episodic.tasks import make_task
    from episodic.tools.replay import replay

    path = tmp_path / "r.h5"
    with Runner(make_task("reach"), log=path) as r:
        home = r.robot.home
        r.send(StartCommand(1, 2))
        command = (TrajectoryCommand(1, 1, 2, wave(home) + 0.5) if bad == "discontinuous"
                   else GainsCommand(1, 1, 2, r.robot.kp, r.robot.kd, task_gains=[1.0]))
        assert r.send(command).flag in (Flag.DISCONTINUOUS, Flag.INVALID_PAYLOAD)
    from episodic.logs import read_episodes

    (ep,) = read_episodes(path)
    assert len(ep.commands) == 2
    assert replay(path).identical


@pytest.mark.parametrize("task", sorted(TASKS))
@pytest.mark.slow
def test_a_learner_that_starts_at_the_reply_posture_is_never_discontinuous(task):
    """The start reply's posture is the task's start posture (ball_in_cup's differs from the
    robot's home on j6 and j7); every reply's posture is where the next segment must start."""
    with Runner(make_task(task)) as r:
        robot = r.robot
        expected = r.task.start_posture(robot)
        start = r.send(StartCommand(1, 3))
        assert start.flag == Flag.OK
        np.testing.assert_allclose(start.posture, expected, rtol=0, atol=robot.goto.tolerance_q)
        if task == "ball_in_cup":
            np.testing.assert_allclose(r.sim.q, start.posture, rtol=0, atol=robot.goto.tolerance_q)
            np.testing.assert_array_equal(np.flatnonzero(start.posture != robot.home), [5, 6])  # j6, j7
        reply = start
        for k in range(1, 4):
            q = wave(reply.posture, amplitude=0.1, phase=0.3 * k)  # ends 0.06 rad away from its start
            reply = r.send(TrajectoryCommand(1, k, 3, q))
            assert reply.flag == Flag.OK, reply.message
            np.testing.assert_array_equal(reply.posture, robot.clamp(q[-1]))
        # a gain set holds where the last segment ended
        r.send(StartCommand(2, 2))
        gains = r.send(GainsCommand(2, 1, 2, robot.kp, robot.kd, wait_time=0.05))
        np.testing.assert_array_equal(gains.posture, expected)


@pytest.mark.parametrize("index", [[3, 4, 5], [5, 1, 2]], ids=["a run", "scattered"])
def test_the_robots_columns_come_out_in_row_order_whatever_their_addresses(index):
    """Scene's column selection (q, qd, u from states and sensordata): values[..., index] as a
    fresh C-ordered array, through a slice where the addresses are a run (every robot and task
    shipped), through np.take where they are not."""
    columns = _columns(np.array(index))
    assert isinstance(columns, slice) == (index == [3, 4, 5])
    values = np.arange(60.0).reshape(10, 6)
    for rows in (values, values[2], values[::3]):
        out = _take(rows, columns)
        np.testing.assert_array_equal(out, rows[..., index])
        assert out.flags.c_contiguous and not np.shares_memory(out, values)


@pytest.mark.serial
def test_a_segment_that_crosses_the_velocity_limit_before_it_blows_up_is_cut_there_in_both_modes():
    """j1 given a negative damping (-200 N m s/rad, more than its PD damping: the closed loop
    grows) crosses its velocity limit at step 57 and makes MuJoCo's accelerations blow up later in
    the same segment: blocking and realtime both cut it at step 57 (blocking used to discard the
    segment whole as unstable, 0 steps), with the same reward, log and posture held (to the
    go-to-start's precision: a realtime episode starts where that move ended, not exactly)."""
    out = {}
    for mode in ("blocking", "realtime"):
        with Runner(make_task("reach"), mode=mode) as runner:
            runner.send(StartCommand(1, 1))
            runner.sim.model.dof_damping[runner.scene.dof_adr[0]] = -200.0
            home = runner.robot.home
            move = min_jerk(home, home + [0.2, 0, 0, 0, 0, 0, 0], 2.0, runner.robot.control_dt)
            warnings = runner.sim.data.warning.number.sum()
            reply = runner.send(TrajectoryCommand(1, 1, 1, move.q, move.qd, move.qdd))
            out[mode] = reply, runner.get_episode(), runner.sim.data.warning.number.sum() - warnings
    (blocking, log, blew_up), (realtime, realtime_log, _) = out["blocking"], out["realtime"]
    assert blew_up > 0  # the compiled run met the instability; the paced one stopped before it
    assert blocking.flag == realtime.flag == Flag.SAFETY_ABORT and "velocity" in blocking.message
    assert blocking.n_steps == realtime.n_steps == 57
    assert blocking.reward == pytest.approx(realtime.reward, rel=1e-9)
    assert blocking.posture == pytest.approx(realtime.posture, abs=1e-6)
    for name in ("q", "qd", "u", "reward"):
        assert log[name] == pytest.approx(realtime_log[name], abs=1e-3), name


def test_every_state_change_goes_through_one_checked_place(runner, caplog):
    with caplog.at_level(logging.DEBUG, logger="episodic.runtime.machine"):
        run_episode(runner, 1, n_segments=2)
    changes = [r.getMessage() for r in caplog.records if r.name == "episodic.runtime.machine"]
    assert changes == ["RESTART -> GOTO_START", "GOTO_START -> WAIT_FOR_START", "WAIT_FOR_START -> DO_MOTION",
                       "DO_MOTION -> WAIT_FOR_COMMAND", "WAIT_FOR_COMMAND -> DO_MOTION", "DO_MOTION -> RESTART"]
    assert machine_module_assignments() == ["__init__", "_enter"]  # the first state, then every change


def machine_module_assignments() -> list[str]:
    """The functions of episodic.runtime.machine that assign ``self.state``."""
    tree = ast.parse(Path(machine_module.__file__).read_text())
    return [f.name for f in ast.walk(tree) if isinstance(f, ast.FunctionDef)
            for node in ast.walk(f) if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign))
            for target in (node.targets if isinstance(node, ast.Assign) else [node.target])
            for t in ast.walk(target) if isinstance(t, ast.Attribute) and t.attr == "state"
            and isinstance(t.value, ast.Name) and t.value.id == "self"]


def test_a_state_change_the_machine_never_makes_is_refused_and_reported(runner):
    with pytest.raises(RuntimeError, match="cannot go from RESTART to DO_MOTION"):
        runner.machine._enter(MachineState.DO_MOTION)
    assert runner.machine.state == MachineState.RESTART
    runner.send(StartCommand(1, 1))
    runner.machine._enter(MachineState.RESTART)  # any state may end in RESTART (a failure)
    # a machine in a state it cannot leave so (here RESTART with an episode running) reports the
    # command it fails on instead of raising
    reply = runner.send(TrajectoryCommand(1, 1, 1, wave(runner.robot.home)))
    assert reply.flag == Flag.INTERNAL_ERROR and "cannot go from RESTART to DO_MOTION" in reply.message
    assert runner.machine.state == MachineState.RESTART and runner.machine.episode is None
