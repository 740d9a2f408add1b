"""The tetherball task with real MuJoCo: the elastic string, the pendulum, the reward, the
scripted reference stroke (over the bridge and replayed: tests/test_tasks_over_bridge.py)."""
from __future__ import annotations

import importlib.util

import numpy as np
import pytest

from episodic.commands import StartCommand, TrajectoryCommand
from episodic.machine import Flag, MachineState
from episodic.runner import Runner
from episodic.tasks import TaskError, make_task
from tests.helpers import ROOT

_spec = importlib.util.spec_from_file_location("tetherball_reference", ROOT / "examples" / "tetherball_reference.py")
reference = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(reference)
RacketIK, reference_commands = reference.RacketIK, reference.reference_commands

G = 9.81
COLUMNS = ("ball_x", "ball_y", "ball_z", "ball_vx", "ball_vy", "ball_vz",
           "target_x", "target_y", "target_z", "distance", "min_distance")


def col(task_state: np.ndarray, name: str) -> np.ndarray:
    return task_state[:, COLUMNS.index(name)]


def ball_rows(ep, index: int | None = None) -> np.ndarray:
    """Task-state rows of the episode's segments (or of segment ``index``)."""
    steps = ep.steps()
    rows = steps["index"] >= 1 if index is None else steps["index"] == index
    return steps["task_state"][rows & (steps["machine_state"] == MachineState.DO_MOTION)]


def stretch(task, rows: np.ndarray) -> np.ndarray:
    """String length minus L per row, m (positive: stretched)."""
    return np.linalg.norm(rows[:, :3] - task.anchor, axis=1) - task.string_length


def place_ball(runner: Runner, position) -> None:
    """Put the ball at rest at ``position`` between commands (a test's hand)."""
    sim = runner.sim
    joint = sim.model.joint("ball")
    qa, va = int(joint.qposadr[0]), int(joint.dofadr[0])
    sim.data.qpos[qa : qa + 3] = position
    sim.data.qvel[va : va + 6] = 0.0
    sim.set_state(sim.get_state())


def hold(runner: Runner, episode_id: int, seconds: float):
    q = runner.task.start_posture(runner.robot)[None]
    return runner.send(TrajectoryCommand(episode_id, 1, 1, q, wait_time=seconds))


def test_task_declares_its_columns_context_and_parameters():
    task = make_task("tetherball")
    assert task.columns == COLUMNS
    assert "target" in task.context_help
    assert {"string_length", "string_stiffness", "ball_mass", "ball_radius", "anchor_x", "anchor_y",
            "anchor_z", "blade_radius", "blade_mass", "handle_mass", "tolerance", "restitution"} <= set(task.params())
    longer = make_task("tetherball", {"string_length": "1.3", "anchor_z": "2.4"})
    assert longer.rest_position[2] == pytest.approx(2.4 - 1.3 - longer.static_stretch)
    with pytest.raises(TaskError, match="string_length"):
        make_task("tetherball", {"string_length": "-1"})


def test_racket_is_part_of_the_arm_and_the_ball_hangs_still():
    with Runner(make_task("tetherball")) as r:
        m, task = r.scene.model, r.task
        racket = m.body("racket")
        assert racket.mass[0] == pytest.approx(task.blade_mass + task.handle_mass)
        assert racket.id in r.scene.arm_bodies  # gravity compensation includes it
        assert r.scene.dynamics.body("racket").mass[0] == pytest.approx(racket.mass[0])
        ball = m.geom("ball")
        for name in ("racket_blade", "racket_handle"):  # the racket collides with the ball
            geom = m.geom(name)
            assert (geom.contype[0] & ball.conaffinity[0]) or (ball.contype[0] & geom.conaffinity[0])
        reply = r.send(StartCommand(1, 1, context=np.array([0.9, -0.5, 1.6])))
        assert reply.flag == Flag.OK
        np.testing.assert_allclose(reply.state[6:9], [0.9, -0.5, 1.6])
        np.testing.assert_allclose(reply.state[:3], task.rest_position, atol=1e-12)
        reply = hold(r, 1, 1.0)
        rows = ball_rows(r.episodes[-1])
        # hanging at its loaded length: no motion at all
        assert np.abs(rows[:, :3] - task.rest_position).max() < 1e-5
        assert np.abs(rows[:, 3:6]).max() < 1e-3
        assert stretch(task, rows).mean() == pytest.approx(task.static_stretch, rel=0.01)


def test_bad_context_or_a_start_posture_inside_the_ball_is_refused():
    with Runner(make_task("tetherball")) as r:
        reply = r.send(StartCommand(1, 1, context=np.array([1.0, 2.0])))
        assert reply.flag == Flag.INVALID_PAYLOAD and "target" in reply.message
        ik = RacketIK(r.scene.model, r.scene.qpos_adr, r.scene.dof_adr, r.robot.range_lower, r.robot.range_upper)
        blade_at_ball, _ = ik.solve(r.task.start_posture(r.robot), r.task.rest_position)
        reply = r.send(StartCommand(2, 1, posture=blade_at_ball))
        assert reply.flag == Flag.INVALID_PAYLOAD and "racket_blade" in reply.message
        assert r.send(StartCommand(3, 1)).flag == Flag.OK


def test_string_is_elastic_and_lossless():
    """A ball dropped from just below the anchor falls free on the slack string, then the string
    catches it, stretching by x with m g (h + x) = k x^2 / 2, and throws it back up."""
    with Runner(make_task("tetherball")) as r:
        task = r.task
        r.send(StartCommand(1, 1))
        drop = 0.02
        place_ball(r, task.anchor - [0.0, 0.0, drop])
        hold(r, 1, 1.2)
        rows = ball_rows(r.episodes[-1])
    mg, k, L = task.ball_mass * G, task.string_stiffness, task.string_length
    expected = (mg + np.sqrt(mg**2 + 2 * k * mg * (L - drop))) / k
    s = stretch(task, rows)
    assert s.max() == pytest.approx(expected, rel=0.03)
    assert s.max() <= task.stretch_allowance
    caught = int(np.argmax(s))
    assert np.linalg.norm(rows[:caught, 3:6], axis=1).max() == pytest.approx(np.sqrt(2 * G * (L - drop)), rel=0.01)
    rebound = rows[caught:, 2].max()  # back up near where it fell from
    assert rebound == pytest.approx(task.anchor[2] - drop, abs=0.02)


@pytest.mark.parametrize("length", [1.0, 1.3])
def test_ball_swings_with_the_pendulum_period(length):
    params = {"string_length": length}
    with Runner(make_task("tetherball", params)) as r:
        task = r.task
        r.send(StartCommand(1, 1))
        ell = length + task.static_stretch
        theta = np.radians(5.0)
        place_ball(r, task.anchor + ell * np.array([np.sin(theta), 0.0, -np.cos(theta)]))
        hold(r, 1, 6.0)
        rows = ball_rows(r.episodes[-1])
    x = col(rows, "ball_x") - task.anchor[0]
    t = np.arange(len(x)) * r.robot.control_dt
    up = np.flatnonzero((x[:-1] < 0) & (x[1:] >= 0))
    crossings = t[up] - x[up] * (t[up + 1] - t[up]) / (x[up + 1] - x[up])
    period = float(np.mean(np.diff(crossings)))
    assert len(crossings) >= 2
    assert period == pytest.approx(2 * np.pi * np.sqrt(length / G), rel=0.05)
    assert period == pytest.approx(2 * np.pi * np.sqrt(ell / G), rel=0.005)  # actually much closer


MIRRORED_55 = [0.85, -np.sin(np.radians(55)), 2.35 - np.cos(np.radians(55))]


def run_reference(target=None, **runner_kw):
    with Runner(make_task("tetherball"), **runner_kw) as r:
        replies = [r.send(c) for c in reference_commands(r.robot, 1, target)]
        closest = r.task.closest_approach()
    return r, replies, closest


def test_reference_stroke_brings_the_ball_to_the_target():
    r, replies, closest = run_reference()
    task, ep = r.task, r.episodes[-1]
    assert [x.flag for x in replies] == [Flag.OK] * 3 and replies[-1].episode_done
    # the approach leaves the ball hanging still; the stroke hits it
    before = ball_rows(ep, 2)[0]
    assert np.abs(before[:3] - task.rest_position).max() < 1e-4 and np.abs(before[3:6]).max() < 1e-3
    rows = ball_rows(ep)
    distance = col(rows, "distance")
    assert distance.min() < 0.1 and ep.success
    assert closest == distance.min()
    # the return is minus the closest approach; each segment's reward its share of it
    assert ep.episode_return == pytest.approx(-distance.min(), abs=1e-12)
    assert replies[1].reward == pytest.approx(-col(ball_rows(ep, 1), "distance").min(), abs=1e-12)
    # the string stays within its allowance through the hit and the swing
    s = stretch(task, rows)
    assert 0 < s.max() < task.stretch_allowance
    # the ball flew: it passed the target well above its rest height
    assert rows[np.argmin(distance), 2] > task.rest_position[2] + 0.15


def test_each_episode_starts_its_closest_approach_afresh():
    """The reward's memory belongs to the episode: a repeated stroke earns the same return
    (a memory carried over would leave the second episode nothing to improve on)."""
    with Runner(make_task("tetherball")) as r:
        for episode_id in (1, 2):
            for command in reference_commands(r.robot, episode_id):
                r.send(command)
        first, second = r.episodes
        assert r.task.closest_approach() == pytest.approx(-second.episode_return, abs=1e-12)
    assert second.episode_return == pytest.approx(first.episode_return, abs=1e-5) and second.success


def test_hard_hit_keeps_the_string_within_its_allowance():
    """A stroke for a target 55 degrees up on the other side (the ball leaves at about 3.3 m/s)."""
    r, replies, _ = run_reference(target=MIRRORED_55)
    assert [x.flag for x in replies] == [Flag.OK] * 3
    rows = ball_rows(r.episodes[-1])
    assert np.linalg.norm(rows[:, 3:6], axis=1).max() > 3.0
    assert 0 < stretch(r.task, rows).max() < r.task.stretch_allowance


def test_rewards_do_not_depend_on_how_the_motion_is_split_into_segments():
    commands = reference_commands("wam", 1)
    start, approach, stroke = commands
    cut = 400
    split = [StartCommand(1, 3, context=start.context),
             TrajectoryCommand(1, 1, 3, approach.q, approach.qd, approach.qdd),
             TrajectoryCommand(1, 2, 3, stroke.q[:cut], stroke.qd[:cut], stroke.qdd[:cut]),
             TrajectoryCommand(1, 3, 3, stroke.q[cut:], stroke.qd[cut:], stroke.qdd[cut:], wait_time=stroke.wait_time)]
    runs = []
    for cmds in (commands, split):
        with Runner(make_task("tetherball")) as r:
            replies = [r.send(c) for c in cmds]
        assert all(x.flag == Flag.OK for x in replies)
        ep = r.episodes[-1]
        motion = ep.steps()["index"] >= 1
        runs.append((ep, ep.steps()["reward"][motion], ep.steps()["task_state"][motion]))
    (one, r1, s1), (two, r2, s2) = runs
    np.testing.assert_array_equal(s1[:, :10], s2[:, :10])  # same motion
    np.testing.assert_allclose(r1, r2, atol=1e-12)
    assert two.episode_return == pytest.approx(one.episode_return, abs=1e-12)
    # min_distance restarts with each segment
    steps = two.steps()
    for index in (1, 2, 3):
        rows = steps["task_state"][steps["index"] == index]
        np.testing.assert_array_equal(col(rows, "min_distance"), np.minimum.accumulate(col(rows, "distance")))

