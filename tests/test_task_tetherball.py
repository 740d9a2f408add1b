"""The tetherball task with real MuJoCo: the elastic string, the pendulum, the reward, the
scripted reference stroke (over the bridge and replayed: tests/test_tasks_over_bridge.py); the seed's
moving target: its circle, the reference that meets it, and a crash, a hold and the reference in
order of return; the seed's continuous play (approaches): the ball's swing back after a hit at a
pendulum's period, the approaches as the module defines them, and ending early never paying."""
from __future__ import annotations

import copy
import importlib.util

import mujoco
import numpy as np
import pytest

from episodic.interface.commands import StartCommand, TrajectoryCommand
from episodic.runtime.machine import Flag, MachineState
from episodic.runtime.runner import Runner
from episodic.task import contact
from episodic.task.kinematics import SiteIK
from episodic.tasks import TaskError, make_task
from episodic.tools.batch import evaluate
from tests.helpers import ROOT

_spec = importlib.util.spec_from_file_location("tetherball_reference", ROOT / "examples" / "tetherball_reference.py")
reference = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(reference)
reference_commands = reference.reference_commands

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
            "anchor_z", "blade_radius", "blade_mass", "handle_mass", "tolerance", "restitution",
            "target_speed"} <= set(task.params())
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
        # the ball touches exactly what its pairs name: the racket, every link of the arm, the floor
        assert ball.contype[0] == 0 and ball.conaffinity[0] == 0
        paired = {m.geom(int(g)).name for g1, g2 in zip(m.pair_geom1, m.pair_geom2) for g in (g1, g2)
                  if ball.id in (g1, g2) and g != ball.id}
        links = {m.geom(g).name for g in range(m.ngeom) if m.geom_contype[g] == 2 and m.geom_bodyid[g] > 0}
        assert {"racket_blade", "racket_handle", "floor"} | links <= paired
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
        ik = SiteIK(r.scene.model, "racket_centre", r.scene.qpos_adr, r.scene.dof_adr, r.robot.range_lower,
                    r.robot.range_upper)
        blade_at_ball, _ = ik.solve(r.task.start_posture(r.robot), r.task.rest_position)
        reply = r.send(StartCommand(2, 1, posture=blade_at_ball))
        assert reply.flag == Flag.INVALID_PAYLOAD and "racket_blade" in reply.message
        assert r.send(StartCommand(3, 1)).flag == Flag.OK


def vertical_fall(task, drop: float, seconds: float, dt: float = 1e-5) -> dict:
    """The ball dropped from ``drop`` m below the anchor, straight down and back up, by a fine
    explicit integration of m z'' = -m g - k (stretch)+ - 1/2 rho Cd A |v| v: the string (a
    lossless dead-band spring) and a sphere's quadratic air drag (episodic.task.contact's air and the
    tennis ball's Cd). Returns the largest speed before the catch, the largest stretch and the
    rebound's apex height, m."""
    m, k, L = task.ball_mass, task.string_stiffness, task.string_length
    drag = 0.5 * contact.AIR_DENSITY * contact.TENNIS_BALL_DRAG_COEFFICIENT * np.pi * task.ball_radius**2
    depth, v = drop, 0.0  # depth below the anchor m, downward speed m/s
    fall_speed, deepest, apex, caught = 0.0, drop, None, False
    for _ in range(int(seconds / dt)):
        stretch_now = max(depth - L, 0.0)
        v += dt * (G - k * stretch_now / m - drag * abs(v) * v / m)
        depth += dt * v
        if stretch_now > 0:
            caught = True
        if not caught:
            fall_speed = max(fall_speed, v)
        deepest = max(deepest, depth)
        if caught and v < 0:
            apex = depth if apex is None else min(apex, depth)
    return {"fall_speed": fall_speed, "stretch": deepest - L, "apex": task.anchor[2] - apex}


def test_string_is_elastic_and_lossless():
    """A ball dropped from just below the anchor falls free on the slack string, then the string
    catches it, stretching by x with m g (h + x) = k x^2 / 2 (less what air drag took), and throws
    it back up: all as a lossless string and a sphere's air drag predict, the drag being what
    keeps the rebound short of the drop height."""
    with Runner(make_task("tetherball")) as r:
        task = r.task
        r.send(StartCommand(1, 1))
        drop = 0.02
        place_ball(r, task.anchor - [0.0, 0.0, drop])
        hold(r, 1, 1.2)
        rows = ball_rows(r.episodes[-1])
    mg, k, L = task.ball_mass * G, task.string_stiffness, task.string_length
    without_air = (mg + np.sqrt(mg**2 + 2 * k * mg * (L - drop))) / k
    predicted = vertical_fall(task, drop, 1.2)
    s = stretch(task, rows)
    assert s.max() == pytest.approx(predicted["stretch"], rel=0.01)
    assert predicted["stretch"] == pytest.approx(without_air, rel=0.03)  # air drag takes little
    assert s.max() <= task.stretch_allowance
    caught = int(np.argmax(s))
    fall_speed = np.linalg.norm(rows[:caught, 3:6], axis=1).max()
    assert fall_speed == pytest.approx(predicted["fall_speed"], rel=0.003)
    assert fall_speed < np.sqrt(2 * G * (L - drop)) * 0.995  # drag slowed it (by 1 %)
    rebound = rows[caught:, 2].max()  # back up near where it fell from, less what drag took
    assert rebound == pytest.approx(predicted["apex"], abs=0.005)
    assert task.anchor[2] - drop - rebound > 0.02


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



def test_the_ball_bounces_off_the_racket_with_a_tennis_balls_restitution():
    """Thrown at 2 m/s square at the blade of the held racket (the string's spring switched off
    in a copy of the scene's model, so that only the contact acts), the ball leaves at
    ``restitution`` times its approach speed relative to the blade: 0.75, a tennis ball on a
    rigid surface (ITF). Eight throws spread the impact over one physics step; each is within
    0.03 (MuJoCo's default contact, without the task's pair, would give about 0: no bounce)."""
    with Runner(make_task("tetherball")) as r:
        r.send(StartCommand(1, 1))
        hold(r, 1, 0.3)
        task, model = r.task, copy.copy(r.sim.model)
        held = copy.copy(r.sim.data)
    model.tendon_stiffness[:] = 0.0
    site, joint = model.site("racket_centre").id, model.joint("ball")
    qa, va, dt = int(joint.qposadr[0]), int(joint.dofadr[0]), model.opt.timestep
    normal = held.site_xmat[site].reshape(3, 3)[:, 0].copy()
    speed, ratios = 2.0, []
    for k in range(8):
        data = copy.copy(held)
        gap = (k + 0.5) / 8 * speed * dt
        data.qpos[qa : qa + 3] = held.site_xpos[site] + normal * (task.blade_thickness / 2 + task.ball_radius + gap)
        data.qvel[va : va + 6] = np.concatenate([-speed * normal, np.zeros(3)])
        touched, site_vel = False, np.zeros(6)
        for _ in range(int(0.1 / dt)):
            mujoco.mj_step(model, data)
            touching = any(model.geom(int(c.geom1)).name == "ball" or model.geom(int(c.geom2)).name == "ball"
                           for c in data.contact[: data.ncon])
            touched = touched or touching
            if touched and not touching:
                break
        mujoco.mj_objectVelocity(model, data, mujoco.mjtObj.mjOBJ_SITE, site, site_vel, 0)
        ratios.append(float((data.qvel[va : va + 3] - site_vel[3:]) @ normal) / speed)
    ratios = np.array(ratios)
    assert np.all(np.abs(ratios - task.restitution) < 0.03), ratios
    assert ratios.mean() == pytest.approx(task.restitution, abs=0.015)


# -- the seed's moving target --------------------------------------------------------------------
def test_a_moving_target_circles_the_anchors_axis_at_its_speed():
    """With target_speed 0.8 rad/s the target goes round the anchor's vertical axis at its start's
    height and distance from it: within 0.5 mm of the circle r (cos(phi0 + w t), sin(phi0 + w t))
    for 10 s (an isotropic oscillator in MuJoCo's step), from the start command's reset on."""
    start = np.array([1.3, -0.4, 1.6])
    with Runner(make_task("tetherball", {"target_speed": 0.8})) as r:
        reply = r.send(StartCommand(1, 1, context=start))
        hold(r, 1, 10.0)
        ep, task = r.episodes[-1], r.task
    np.testing.assert_allclose(reply.state[6:9], start, atol=1e-12)
    steps = ep.steps()
    motion = steps["index"] >= 1
    rows, t = steps["task_state"][motion], steps["time"][motion]
    assert t[0] == 0.0
    expected = task.target_at(start, t)
    assert np.abs(col(rows, "target_x") - expected[:, 0]).max() < 5e-4
    assert np.abs(col(rows, "target_y") - expected[:, 1]).max() < 5e-4
    assert np.all(col(rows, "target_z") == start[2])
    turned = np.unwrap(np.arctan2(col(rows, "target_y") - task.anchor_y, col(rows, "target_x") - task.anchor_x))
    assert turned[-1] - turned[0] == pytest.approx(0.8 * t[-1], rel=1e-3)


@pytest.mark.parametrize("speed", [0.8, -0.8, -1.5])
@pytest.mark.slow
def test_the_reference_meets_a_moving_target(speed):
    params = {"target_speed": speed}
    with Runner(make_task("tetherball", params)) as r:
        replies = [r.send(c) for c in reference_commands(r.robot, 1, params=params)]
        ep = r.episodes[-1]
    assert [x.flag for x in replies] == [Flag.OK] * 3 and ep.success
    assert -ep.episode_return < 0.05
    rows = ball_rows(ep)
    k = int(np.argmin(col(rows, "distance")))
    assert rows[k, 2] > r.task.rest_position[2] + 0.15  # met in flight, where the target then was


@pytest.mark.slow
def test_a_crash_never_beats_holding_still_which_never_beats_the_reference_on_a_moving_target():
    """A swing of j1 that trips the safety abort within 50 ms, the start posture held as long as the
    reference's motion (the target passes no nearer the hanging ball than a crash sees: the return
    is the closest approach so far), the reference meeting the target."""
    params = {"target_speed": 0.8}
    stroke = reference_commands("wam", 3, params=params)
    n = sum(len(c.q) + int(round(c.wait_time * 500)) for c in stroke[1:])
    posture = make_task("tetherball").start_posture(reference.load_robot("wam"))
    still = np.tile(posture, (n, 1))
    crash = still.copy()
    crash[:, 0] += np.minimum(200.0 * (np.arange(1, n + 1) * 0.002) ** 2, 0.5)
    episodes = [[StartCommand(i, 1, context=stroke[0].context), TrajectoryCommand(i, 1, 1, q)]
                for i, q in ((1, crash), (2, still))] + [stroke]
    crashed, held, hit = evaluate(episodes, ("tetherball", params), threads=2)
    assert crashed.flag == Flag.SAFETY_ABORT and crashed.command_steps[-1] < 25
    assert crashed.episode_return <= held.episode_return <= hit.episode_return and hit.success


# -- the seed's continuous play ---------------------------------------------------------------------
def approach_starts(task) -> np.ndarray:
    """s, the times of the steps that begin the second and later approaches."""
    memory = task.episode
    return memory.times[np.flatnonzero(np.diff(memory.approach)) + 1]


def test_after_a_hit_the_ball_swings_back_with_the_pendulum_period_and_each_swing_is_one_approach():
    """The reference's stroke with 4 approaches scored: the ball, hit once, swings back to the
    target by itself (the string is lossless, the air takes about 1 cm of apex a swing). The
    approaches begin a swing period apart, the period of a pendulum of the loaded string's length
    at the amplitude the ball's apexes show (4 sqrt(l / g) K(sin^2(theta_0 / 2))), within 1 %; each
    begins where the ball is back as far from the target as it hung, after coming within d_0 -
    tolerance of it; the return is minus the sum of the approaches' closest distances."""
    from scipy.special import ellipk

    params = {"approaches": 4}
    with Runner(make_task("tetherball", params)) as r:
        replies = [r.send(c) for c in reference_commands(r.robot, 1, params=params)]
        task, ep = r.task, r.episodes[-1]
        starts, distances, memory = approach_starts(task), task.approach_distances(), copy.deepcopy(task.episode)
    assert [x.flag for x in replies] == [Flag.OK] * 3 and ep.success
    assert len(starts) == 3 and len(distances) == 4 and np.all(distances < task.tolerance)
    assert ep.episode_return == pytest.approx(-distances.sum(), abs=1e-12)
    steps = ep.steps()
    motion = (steps["index"] >= 1) & (steps["machine_state"] == MachineState.DO_MOTION)
    rows, t = steps["task_state"][motion], steps["time"][motion]
    distance, hanging = col(rows, "distance"), memory.hanging
    assert hanging == distance[0]
    for k in np.searchsorted(t, starts):
        assert distance[k] >= hanging > distance[k - 1]  # back as far from the target as it hung
    edges = np.concatenate([[0], np.searchsorted(t, starts), [len(t)]])
    for i, (a, b) in enumerate(zip(edges[:-1], edges[1:])):
        assert distance[a:b].min() < hanging - task.tolerance  # each came near
        assert distances[i] == pytest.approx(distance[a:b].min(), abs=1e-15)
    # the period: apexes on the target's side between the approaches' starts
    length = task.anchor[2] - task.rest_position[2]
    y = col(rows, "ball_y") - task.anchor_y
    for a, b in zip(edges[1:-2], edges[2:-1]):
        apex = a + int(np.argmax(col(rows, "ball_z")[a:b] * (y[a:b] > 0)))
        amplitude = np.arccos((task.anchor[2] - rows[apex, 2]) / length)
        period = 4 * np.sqrt(length / G) * ellipk(np.sin(amplitude / 2) ** 2)
        assert t[b] - t[a] == pytest.approx(period, rel=0.01)
        assert period > 2 * np.pi * np.sqrt(length / G) * 1.02  # a wide swing: slower than a small one


def test_later_approaches_of_a_ball_hit_once_sink_below_the_target():
    """The reference's single stroke, 9 approaches: the first 8 within the tolerance, the closest
    distance growing from the 4th on as the air takes the swing's height, the 9th missing: no
    success, and a return below the 8 approaches' sum by more than the tolerance."""
    params = {"approaches": 9}
    with Runner(make_task("tetherball", params)) as r:
        [r.send(c) for c in reference_commands(r.robot, 1, params=params)]
        distances, ep = r.task.approach_distances(), r.episodes[-1]
    assert len(distances) == 9 and np.all(distances[:8] < 0.1) and distances[8] > 0.1 and not ep.success
    assert np.all(np.diff(distances[3:]) > 0)


@pytest.mark.slow
def test_continuous_play_never_pays_to_end_early():
    """With 3 approaches: a crash within 50 ms and holding still each score every approach as the
    hanging ball (-3 d_0; the crash no better), the single stroke stopped after its first approach
    (the reference's segments without the longer wait) scores that approach and 2 d_0, and the
    reference playing all three scores best: crash <= hold <= stopped <= reference."""
    params = {"approaches": 3}
    start, approach, stroke = reference_commands("wam", 4, params=params)
    n = len(approach.q) + len(stroke.q) + int(round(stroke.wait_time * 500))
    posture = make_task("tetherball").start_posture(reference.load_robot("wam"))
    still = np.tile(posture, (n, 1))
    crash = still.copy()
    crash[:, 0] += np.minimum(200.0 * (np.arange(1, n + 1) * 0.002) ** 2, 0.5)
    stopped = reference_commands("wam", 3)
    episodes = [[StartCommand(i, 1, context=start.context), TrajectoryCommand(i, 1, 1, q)]
                for i, q in ((1, crash), (2, still))] + [stopped, [start, approach, stroke]]
    crashed, held, cut, full = evaluate(episodes, ("tetherball", params), threads=2)
    task = make_task("tetherball", params)
    hanging = float(np.linalg.norm(task.rest_position - task.default_target))
    assert crashed.flag == Flag.SAFETY_ABORT and crashed.command_steps[-1] < 25
    assert held.episode_return == pytest.approx(-3 * hanging, abs=1e-9)
    assert cut.episode_return == pytest.approx(-2 * hanging - 0.0256, abs=1e-3)
    assert crashed.episode_return <= held.episode_return < cut.episode_return < full.episode_return
    assert full.success and not cut.success and not held.success



def test_on_another_arm_the_scene_moves_rigidly_with_the_hanging_ball():
    """On the Puma 560 the hanging ball is where the WAM's is, placed in the Puma's frame (scaled
    to its reach); the anchor and the target keep their offsets from it, turned with the Puma's
    facing, unscaled (the string's length and the swing are physics). The WAM keeps the numbers."""
    from episodic.task import RobotFrame

    wam, puma = make_task("tetherball"), make_task("tetherball")
    wam.check_robot(reference.load_robot("wam"))
    np.testing.assert_array_equal(wam.anchor, [0.85, 0.0, 2.35])
    np.testing.assert_array_equal(wam.default_target, [0.85, 0.6, 1.55])
    robot = reference.load_robot("puma560")
    puma.check_robot(robot)
    frame = RobotFrame.of(robot)
    np.testing.assert_allclose(puma.rest_position, frame.from_wam(wam.rest_position), atol=1e-12)
    np.testing.assert_allclose(puma.anchor - puma.rest_position, wam.anchor - wam.rest_position, atol=1e-12)
    np.testing.assert_allclose(puma.default_target - puma.anchor,
                               frame.direction_from_wam(wam.default_target - wam.anchor), atol=1e-12)
