"""ball_in_cup with real MuJoCo: the scene, the string's physics, the catch test, the
reference swing (over the bridge and replayed: tests/test_tasks_over_bridge.py)."""
from __future__ import annotations

import mujoco
import numpy as np
import pytest

from episodic import demo
from episodic.commands import StartCommand, TrajectoryCommand
from episodic.log import read_metadata
from episodic.protocol import Flag
from episodic.runner import Runner
from examples.ball_in_cup_reference import reference_commands
from episodic.tasks import TaskError, make_task
from episodic.tasks.ball_in_cup import BallInCup

COLUMNS = BallInCup.columns
G = 9.81


def col(name: str) -> int:
    return COLUMNS.index(name)


def motion_state(runner: Runner) -> np.ndarray:
    """Task state rows (n, n_columns) of the last episode's trajectory segments."""
    steps = runner.episodes[-1].steps()
    return steps["task_state"][steps["index"] >= 1]


def hold(runner: Runner, seconds: float) -> np.ndarray:
    """(n, 7) samples holding the task's start posture."""
    start = runner.task.start_posture(runner.robot)
    return np.tile(start, (int(round(seconds * runner.robot.control_rate)), 1))


def place_ball(runner: Runner, position, velocity=(0, 0, 0)) -> None:
    """Set the ball's state directly (in-process only)."""
    m, d = runner.sim.model, runner.sim.data
    joint = m.joint("ball")
    qa, va = int(joint.qposadr[0]), int(joint.dofadr[0])
    d.qpos[qa : qa + 3], d.qpos[qa + 3 : qa + 7] = position, [1, 0, 0, 0]
    d.qvel[va : va + 3], d.qvel[va + 3 : va + 6] = velocity, 0
    mujoco.mj_forward(m, d)
    runner.sim.touch()


def site_pos(runner: Runner, name: str) -> np.ndarray:
    return runner.sim.data.site_xpos[runner.sim.model.site(name).id].copy()


@pytest.fixture
def runner():
    with Runner(make_task("ball_in_cup")) as r:
        yield r


# -- scene ----------------------------------------------------------------------------------
@pytest.mark.parametrize("posture", ["home", "start"])
def test_cup_is_clear_of_the_arm_and_collides_with_the_ball(runner, posture):
    m, d = runner.sim.model, runner.sim.data
    q = runner.robot.home if posture == "home" else runner.task.start_posture(runner.robot)
    d.qpos[runner.scene.qpos_adr] = q
    mujoco.mj_forward(m, d)
    cup = [i for i in range(m.ngeom) if m.body(m.geom_bodyid[i]).name == "cup"]
    arm = [i for i in range(m.ngeom) if m.geom_bodyid[i] in runner.scene.arm_bodies and i not in cup]
    assert len(cup) >= 10 and len(arm) >= 10
    fromto = np.zeros(6)
    for g in cup:
        gap = min(mujoco.mj_geomDistance(m, d, g, a, 0.2, fromto) for a in arm)
        if m.geom(g).name == "cup_bracket":
            assert gap > -1e-9, "the bracket sits on the flange face, it does not cut into it"
        else:
            assert gap > 0.005, (m.geom(g).name, gap)
    ball = m.geom("ball").id
    collides = lambda a, b: bool(m.geom_contype[a] & m.geom_conaffinity[b] or m.geom_contype[b] & m.geom_conaffinity[a])
    assert all(collides(ball, g) for g in cup + arm)
    assert not any(collides(c, a) for c in cup for a in arm)
    # the cup is part of the arm: gravity-compensated and in the inverse-dynamics model
    assert m.body("cup").id in runner.scene.arm_bodies
    assert runner.scene.dynamics.body("cup").mass[0] == pytest.approx(runner.task.cup_mass)


def test_start_hangs_the_ball_still_below_the_cup(runner):
    reply = runner.send(StartCommand(1, 1))
    assert reply.flag == Flag.OK
    s = reply.state
    anchor = site_pos(runner, "cup_anchor")
    np.testing.assert_allclose(s[0:3], anchor - [0, 0, runner.task.string_length], atol=1e-12)
    np.testing.assert_array_equal(s[3:6], 0.0)
    assert s[col("height")] == pytest.approx(-(runner.task.string_length + runner.task.cup_depth + 0.006), abs=1e-3)
    assert s[col("radial")] < 0.005 and s[col("caught")] == 0  # the cup stands upright
    assert runner.sim.data.ncon == 0
    # a context offsets the ball sideways with the string taut
    reply = runner.send(StartCommand(2, 1, context=np.array([0.1, -0.05])))
    assert reply.flag == Flag.OK
    offset = reply.state[0:3] - site_pos(runner, "cup_anchor")
    np.testing.assert_allclose(offset[:2], [0.1, -0.05], atol=1e-12)
    assert np.linalg.norm(offset) == pytest.approx(runner.task.string_length)
    for bad in ([0.1], [0.5, 0.0]):
        reply = runner.send(StartCommand(3, 1, context=np.array(bad)))
        assert reply.flag == Flag.INVALID_PAYLOAD and reply.episode_done


def test_parameters_are_settable_checked_and_logged(tmp_path):
    params = {"string_length": "0.3", "cup_radius": "0.05", "ball_mass": "0.03", "string_timeconst": "0.008"}
    with Runner(make_task("ball_in_cup", params), log=tmp_path / "p.h5") as r:
        m = r.scene.model
        string = m.tendon("string").id
        assert m.tendon_range[string, 1] == pytest.approx(0.3)
        assert m.tendon_solref_lim[string, 0] == pytest.approx(0.008)
        assert m.body("ball").mass[0] == pytest.approx(0.03)
        reply = r.send(StartCommand(1, 1))
        assert reply.state[col("string")] == pytest.approx(0.3, abs=1e-4)
    logged = read_metadata(tmp_path / "p.h5")["task_params"]
    assert logged["string_length"] == 0.3 and logged["cup_radius"] == 0.05 and logged["ball_radius"] == 0.02
    with pytest.raises(TaskError, match="cup_radius"):
        make_task("ball_in_cup", {"cup_radius": "0.01"})
    with pytest.raises(TaskError, match="string_length"):
        make_task("ball_in_cup", {"string_length": "-1"})


# -- physics --------------------------------------------------------------------------------
def vigorous_swing(start: np.ndarray, dt: float, seconds: float = 3.0, frequency: float = 1.5) -> np.ndarray:
    """Sinusoids on j2, j4, j6 (0.15, 0.3, 1.2 rad) faded in and out: the ball whips around,
    the string goes slack and snaps taut again; joint speeds stay below their limits."""
    t = np.arange(1, int(seconds / dt) + 1) * dt
    fade = np.sin(np.pi * t / seconds) ** 2
    q = np.tile(start, (len(t), 1))
    for joint, amplitude, phase in ((1, 0.15, 0.0), (3, 0.3, 1.0), (5, 1.2, 2.0)):
        q[:, joint] += amplitude * fade * (np.sin(2 * np.pi * frequency * t + phase) - np.sin(phase))
    return q


def test_string_never_stretches_past_its_allowance(runner):
    L = runner.task.string_length
    runner.send(StartCommand(1, 1))
    q = vigorous_swing(runner.task.start_posture(runner.robot), runner.robot.control_dt)
    reply = runner.send(TrajectoryCommand(1, 1, 1, q, wait_time=0.5))
    assert reply.flag == Flag.OK, reply.message
    string = motion_state(runner)[:, col("string")]
    assert string.min() < L - 0.2, "the string went slack (free flight)"
    assert np.mean(string > L) > 0.3, "and taut"
    stretch = string.max() - L
    assert 0 < stretch <= BallInCup.STRETCH_ALLOWANCE, stretch  # measured: 7.7 mm
    # the reference swing, whose string snaps taut hard once, too
    for command in reference_commands(runner.robot, 2):
        runner.send(command)
    assert motion_state(runner)[:, col("string")].max() - L <= BallInCup.STRETCH_ALLOWANCE


def test_ball_dropped_into_the_cup_is_caught_and_stays():
    # rest_time longer than the hold: the segment runs whole and the ball is watched throughout
    with Runner(make_task("ball_in_cup", {"rest_time": 5.0})) as r:
        r.send(StartCommand(1, 1))
        place_ball(r, site_pos(r, "cup_rim") + [0.01, 0.005, 0.15])
        reply = r.send(TrajectoryCommand(1, 1, 1, hold(r, 3.0)))
        assert reply.flag == Flag.OK and reply.n_steps == 1500
        s = motion_state(r)
        inside = (s[:, col("height")] < 0) & (s[:, col("radial")] < r.task.cup_radius)
        entered = int(np.argmax(inside))
        assert 0 < entered < 150 and inside[entered:].all(), "the ball drops in and stays in"
        assert s[-200:, col("caught")].all() and r.episodes[-1].success
        # one rim crossing on the axis (about 1) and the catch bonus at the end of the segment
        assert reply.reward == pytest.approx(1 + BallInCup.CATCH_BONUS, abs=0.01)
        assert s[-1, col("string")] < 0.05
    # default rest_time: the segment ends once the ball has rested in the cup 0.2 s
    with Runner(make_task("ball_in_cup")) as r:
        r.send(StartCommand(1, 1))
        place_ball(r, site_pos(r, "cup_rim") + [0.01, 0.005, 0.15])
        reply = r.send(TrajectoryCommand(1, 1, 1, hold(r, 3.0)))
        assert reply.flag == Flag.OK and reply.episode_done and reply.n_steps < 500
        assert reply.state[col("caught")] == 1 and r.episodes[-1].success
        assert reply.reward == pytest.approx(1 + BallInCup.CATCH_BONUS, abs=0.01)


def test_ball_missing_the_cup_is_not_caught(runner):
    runner.send(StartCommand(1, 1))
    place_ball(runner, site_pos(runner, "cup_rim") + [0.15, 0.0, 0.15])
    reply = runner.send(TrajectoryCommand(1, 1, 1, hold(runner, 1.5)))
    assert reply.flag == Flag.OK and reply.n_steps == 750
    assert not runner.episodes[-1].success and reply.state[col("caught")] == 0
    # it crossed the rim plane 0.15 m off the axis: exp(-20 * 0.15^2)
    assert reply.reward == pytest.approx(np.exp(-BallInCup.CROSSING_ALPHA * 0.15**2), abs=0.02)


def test_hanging_ball_swings_with_the_pendulum_period(runner):
    L = runner.task.string_length  # anchor to ball centre; the string holds the centre, so
    # the ball's own rotation does not enter: a point-mass pendulum of length L
    runner.send(StartCommand(1, 1, context=np.array([0.02, 0.0])))  # 2.9 degrees
    runner.send(TrajectoryCommand(1, 1, 1, hold(runner, 6.0)))
    s = motion_state(runner)
    t = np.arange(len(s)) * runner.robot.control_dt
    x = s[:, col("ball_x")] - s[:, col("cup_x")]
    x -= x.mean()
    up = np.flatnonzero((x[:-1] < 0) & (x[1:] >= 0))
    crossings = t[up] - x[up] * runner.robot.control_dt / (x[up + 1] - x[up])
    period = np.mean(np.diff(crossings))
    expected = 2 * np.pi * np.sqrt(L / G)
    assert len(crossings) >= 4
    assert period == pytest.approx(expected, rel=0.05)  # measured: within 0.01 %
    assert np.all(np.abs(s[:, col("string")] - L) < 1e-3), "the string stays taut"


# -- the reference swing ------------------------------------------------------------------------
def test_reference_swing_catches_the_ball(runner):
    commands = reference_commands(runner.robot, episode_id=1)
    assert isinstance(commands[0], StartCommand) and all(isinstance(c, TrajectoryCommand) for c in commands[1:])
    replies = [runner.send(c) for c in commands]
    assert [r.flag for r in replies] == [Flag.OK] * len(commands)
    assert replies[-1].episode_done and replies[-1].state[col("caught")] == 1
    episode = runner.episodes[-1]
    assert episode.success
    assert episode.episode_return > 1 + BallInCup.CATCH_BONUS - 0.1  # measured 4.345
    swing = sum(len(c.q) for c in commands[1:]) * runner.robot.control_dt
    assert 1.5 <= swing <= 2.5, "a swing of Kober & Peters' length"


def test_perturbed_reference_swings_run(runner):
    swings = demo.demo_swings(5, seed=1, noise=demo.DEMO_NOISE)
    rows = demo.run_swings(runner.send, runner.robot, swings)
    assert [r.flag for r in rows] == ["OK"] * 5
    assert rows[0].caught and sum(r.caught for r in rows) >= 2
    for r in rows:
        assert (r.episode_return > BallInCup.CATCH_BONUS) == r.caught

