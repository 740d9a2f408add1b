"""The ball_bouncing task with real MuJoCo: the racket's restitution by drop tests, the ball's
flight against the drag law and the parabola, the bounce bookkeeping, the floor, and the
scripted reference (also with a late, noisy tracker; over the bridge and replayed:
tests/test_tasks_over_bridge.py)."""
from __future__ import annotations

import copy
import importlib

import mujoco
import numpy as np
import pytest

from episodic.interface.commands import GainsCommand, StartCommand, TrajectoryCommand
from episodic.runtime.machine import Flag
from episodic.runtime.runner import Runner
from episodic.task import StepView, contact
from episodic.tasks import TaskError, make_task
from tests.test_task_tetherball import ball_rows  # task-state rows of an episode's segments

reference = importlib.import_module("examples.ball_bouncing_reference")

G = 9.81
COLUMNS = ("ball_x", "ball_y", "ball_z", "ball_vx", "ball_vy", "ball_vz", "face_x", "face_y", "face_z", "tilt",
           "height", "lateral", "target_z", "on_racket", "contact", "floor")


def col(rows: np.ndarray, name: str) -> np.ndarray:
    return rows[:, COLUMNS.index(name)]


def hold(runner: Runner, episode_id: int, index: int, max_commands: int, seconds: float):
    q = runner.task.start_posture(runner.robot)[None]
    return runner.send(TrajectoryCommand(episode_id, index, max_commands, q, wait_time=seconds))


def set_ball(runner: Runner, position, velocity) -> None:
    """Put the ball at ``position`` moving at ``velocity``, not spinning, between commands."""
    sim = runner.sim
    joint = sim.model.joint("ball")
    qa, va = int(joint.qposadr[0]), int(joint.dofadr[0])
    sim.data.qpos[qa : qa + 3] = position
    sim.data.qpos[qa + 3 : qa + 7] = [1.0, 0.0, 0.0, 0.0]
    sim.data.qvel[va : va + 3] = velocity
    sim.data.qvel[va + 3 : va + 6] = 0.0
    sim.set_state(sim.get_state())


def test_task_declares_its_columns_context_gains_and_parameters():
    task = make_task("ball_bouncing")
    assert task.columns == COLUMNS
    assert task.context_sizes == (0, 1, 2, 3, 4, 5, 6) and "restitution" in task.context_help
    assert "k_r" in task.gains_help
    assert {"ball_mass", "ball_radius", "restitution", "head_radius", "head_thickness", "head_mass", "handle_length",
            "handle_mass", "max_tilt", "target_apex", "apex_band", "min_bounces"} <= set(task.params())
    np.testing.assert_allclose(task.default_context(), [0.45, 0.75, 0, 0, 0, 0])
    assert make_task("ball_bouncing", {"head_radius": "0.15"}).head_radius == 0.15
    with pytest.raises(TaskError, match="smaller than the racket's head"):
        make_task("ball_bouncing", {"ball_radius": "0.2"})
    with pytest.raises(TaskError, match="restitution"):
        make_task("ball_bouncing", {"restitution": "1"})


def test_bad_contexts_postures_and_gains_are_refused():
    with Runner(make_task("ball_bouncing")) as r:
        for episode_id, context, words in [(1, [0.45, 0.75, 0, 0, 0, 0, 0], "leading part"),
                                           (2, [0.45, 1.0], "restitution"),
                                           (3, [0.45, 0.75, 0.1, 0.1], "off the face"),
                                           (4, [0.45, 0.75, 0, 0, 1.5, 0], "roll"),
                                           (5, [-0.1], "apex")]:
            reply = r.send(StartCommand(episode_id, 1, context=np.array(context, float)))
            assert reply.flag == Flag.INVALID_PAYLOAD and words in reply.message, reply.message
        tilted = r.task.start_posture(r.robot)
        tilted[5] += 0.4
        reply = r.send(StartCommand(6, 1, posture=tilted))
        assert reply.flag == Flag.INVALID_PAYLOAD and "horizontal" in reply.message
        assert r.send(StartCommand(7, 1)).flag == Flag.OK
        reply = r.send(GainsCommand(7, 1, 1, r.robot.kp, r.robot.kd, task_gains=np.ones(3)))
        assert reply.flag == Flag.INVALID_PAYLOAD and "task gains" in reply.message


def test_ball_starts_on_the_face_and_each_episode_sets_the_racket_restitution():
    with Runner(make_task("ball_bouncing"), keep_episodes=True) as r:
        model, task = r.sim.model, r.task
        pair = model.pair("ball-racket_head").id
        floor_pair = model.pair("ball-floor").id
        floor_solref = model.pair_solref[floor_pair].copy()
        dt = model.opt.timestep
        reply = r.send(StartCommand(1, 1, context=np.array([0.3, 0.6, 0.03, -0.02, 0.1, 0.0])))
        assert reply.flag == Flag.OK
        np.testing.assert_allclose(model.pair_solref[pair], contact.solref_for_restitution(0.6, dt))
        state = reply.state
        np.testing.assert_allclose(state[0:3], state[6:9] + [0.03, -0.02, task.ball_radius], atol=1e-9)
        assert state[COLUMNS.index("height")] == pytest.approx(0.0, abs=1e-9)
        assert state[COLUMNS.index("lateral")] == pytest.approx(np.hypot(0.03, 0.02), abs=1e-9)
        assert state[COLUMNS.index("target_z")] == pytest.approx(state[2] + 0.3)
        assert state[COLUMNS.index("tilt")] == pytest.approx(0.0, abs=1e-9)
        np.testing.assert_allclose(state[3:6], [0.1, 0.0, 0.0], atol=1e-12)
        joint = model.joint("ball")
        spin = r.sim.data.qvel[int(joint.dofadr[0]) + 3 : int(joint.dofadr[0]) + 6]
        np.testing.assert_allclose(spin, [0.0, 0.1 / task.ball_radius, 0.0], atol=1e-9)  # rolling: no slip at the face
        # the next episode without a context has the parameter's restitution again; the floor never changes
        assert r.send(StartCommand(2, 1)).flag == Flag.OK
        np.testing.assert_allclose(model.pair_solref[pair], contact.solref_for_restitution(0.75, dt))
        np.testing.assert_array_equal(model.pair_solref[floor_pair], floor_solref)
        # the ball lies on the held racket: it stays there, pressing on the head
        hold(r, 2, 1, 1, 0.5)
    rows = ball_rows(r.episodes[-1])
    assert np.all(col(rows, "on_racket")[5:] == 1) and np.all(col(rows, "floor") == 0)
    assert np.abs(col(rows, "height")).max() < 0.002


@pytest.mark.parametrize("restitution", [0.6, 0.75, 0.9])
def test_drop_test_restitution_at_the_tasks_physics_step(restitution):
    """The issue's drop test: the task's tennis ball on a fixed surface through the pair the
    task makes, at the task's physics step (0.5 ms), at a bounce's impact speed (3 m/s)."""
    task = make_task("ball_bouncing")
    dt = 1 / 500 / task.substeps
    bounce = contact.measure_restitution(restitution, dt, task.ball_radius, task.ball_mass, impact_speed=3.0)
    assert bounce.mean == pytest.approx(restitution, abs=0.01)
    assert restitution - 0.02 < bounce.low <= bounce.high < restitution + 0.02


@pytest.mark.parametrize("restitution", [0.6, 0.9])
def test_ball_dropped_on_the_held_racket_rebounds_with_the_episodes_restitution(restitution):
    """Dropped from 0.45 m (2.97 m/s) square onto the racket held at the start posture, the
    ball leaves at the episode's restitution times its approach speed relative to the face
    (four drops spread over one physics step); the arm gives a little under the impact, so
    relative to the floor the rebound is less: 91-96 % of that (measured)."""
    with Runner(make_task("ball_bouncing")) as r:
        r.send(StartCommand(1, 1, context=np.array([0.45, restitution])))
        hold(r, 1, 1, 1, 0.3)
        model, held = copy.copy(r.sim.model), copy.copy(r.sim.data)
    site, joint = model.site("racket_face").id, model.joint("ball")
    va, qa, dt = int(joint.dofadr[0]), int(joint.qposadr[0]), model.opt.timestep
    speed, relative, absolute = np.sqrt(2 * G * 0.45), [], []
    for k in range(4):
        data = copy.copy(held)
        data.qpos[qa : qa + 3] = held.site_xpos[site] + [0, 0, 0.0335 + (k + 0.5) / 4 * speed * dt]
        data.qpos[qa + 3 : qa + 7] = [1, 0, 0, 0]
        data.qvel[va : va + 6] = [0, 0, -speed, 0, 0, 0]
        touched, face = False, np.zeros(6)
        for _ in range(int(0.1 / dt)):
            mujoco.mj_step(model, data)
            touching = data.ncon > 0
            touched = touched or touching
            if touched and not touching:
                break
        mujoco.mj_objectVelocity(model, data, mujoco.mjtObj.mjOBJ_SITE, site, face, 0)
        relative.append((data.qvel[va + 2] - face[5]) / speed)
        absolute.append(data.qvel[va + 2] / speed)
    relative, absolute = np.array(relative), np.array(absolute)
    assert np.all(np.abs(relative - restitution) < 0.03), relative
    assert relative.mean() == pytest.approx(restitution, abs=0.015)
    assert np.all((absolute > 0.88 * restitution) & (absolute < relative)), absolute / restitution


def test_a_hit_off_the_centre_turns_the_racket_and_kicks_the_ball_outward():
    """Why the task has a mirror law: dropped from 0.45 m onto the racket held with the robot's
    gains, a ball 2 cm off the centre leaves sideways, outward, where one at the centre goes
    (nearly) straight up: along the flange axis (world x, the wrist's j6 gives) and more across it
    (world y, j7 gives)."""
    kicks = []
    with Runner(make_task("ball_bouncing"), keep_episodes=True) as r:
        for episode_id, offset in enumerate([(0.0, 0.0), (0.02, 0.0), (0.0, 0.02)], start=1):
            reply = r.send(StartCommand(episode_id, 1, context=np.array([0.45, 0.75, *offset])))
            set_ball(r, reply.state[0:3] + [0, 0, 0.005], [0, 0, -np.sqrt(2 * G * 0.45)])
            hold(r, episode_id, 1, 1, 0.2)
            rows = ball_rows(r.episodes[-1])
            left = np.flatnonzero((col(rows, "contact")[:-1] > 0) & (col(rows, "contact")[1:] == 0))[0] + 1
            kicks.append(rows[left, 3:5])
    centre, along, across = kicks
    assert np.abs(centre).max() < 0.003
    assert along[0] - centre[0] == pytest.approx(0.017, abs=0.004) and abs(along[1] - centre[1]) < 0.002
    assert across[1] - centre[1] == pytest.approx(0.06, abs=0.01) and abs(across[0] - centre[0]) < 0.002


def test_flight_follows_the_drag_law_not_the_parabola():
    """Thrown straight up at 3 m/s from 5 cm above the still racket, the ball peaks where an
    integration of m z'' = -m g - 1/2 rho Cd A |v| v (the task's air and a tennis ball's Cd)
    says, within 0.05 mm once MuJoCo's semi-implicit Euler step is allowed for (it peaks v dt / 2
    = 0.75 mm lower than the exact flight at dt = 0.5 ms), 4 mm short of the parabola's
    v^2 / 2g, and comes back to the launch height when that integration says (the task's
    apex, from the step before it)."""
    with Runner(make_task("ball_bouncing"), keep_episodes=True) as r:
        reply = r.send(StartCommand(1, 1))
        launch = reply.state[0:3] + [0, 0, 0.05]
        set_ball(r, launch, [0, 0, 3.0])
        hold(r, 1, 1, 1, 0.8)
        memory, rows = r.task.episode, ball_rows(r.episodes[-1])
    k = reference.drag_constant(r.task)
    apex, _, back, _ = reference.fly(0.0, 3.0, k)
    measured = memory.apexes[0][1] - launch[2]
    euler = 3.0 * r.sim.model.opt.timestep / 2
    assert measured == pytest.approx(apex - euler, abs=5e-5)
    assert 3.0**2 / (2 * G) - measured == pytest.approx(0.0039 + euler, abs=0.0003)
    z, t = col(rows, "ball_z") - launch[2], np.arange(len(rows)) * r.robot.control_dt
    down = np.flatnonzero((z[:-1] >= 0) & (z[1:] < 0) & (t[1:] > 0.1))[0]
    crossing = t[down] + z[down] / (z[down] - z[down + 1]) * r.robot.control_dt
    assert crossing == pytest.approx(back, abs=0.002)
    assert crossing < 2 * 3.0 / G - 0.001  # drag brings it back sooner than the parabola


def test_the_floor_ends_the_game_but_not_the_segment():
    """A ball rolled off the face falls to the floor: from that step on nothing is earned and the
    episode fails, though its segments run whole (a bounce on the racket after it counts for
    nothing)."""
    with Runner(make_task("ball_bouncing"), keep_episodes=True) as r:
        r.send(StartCommand(1, 2, context=np.array([0.45, 0.75, 0.0, 0.1, 0.0, 0.8])))
        first = hold(r, 1, 1, 2, 1.5)  # the ball rolls off the face and falls
        second = hold(r, 1, 2, 2, 0.5)
        memory = r.task.episode
    assert first.flag == second.flag == Flag.OK and second.episode_done
    assert first.n_steps == 751 and second.n_steps == 251
    rows = ball_rows(r.episodes[-1])
    floor = col(rows, "floor") > 0
    assert not floor[0] and floor.any() and memory.floored  # (it bounces on the floor, too)
    landed = int(np.argmax(floor))
    assert 0.4 < landed * r.robot.control_dt < 1.0  # off the rim, then 1.25 m down
    assert first.reward == second.reward == 0.0 and not r.episodes[-1].success


def test_mirror_law_tilts_the_face_toward_its_centre():
    """The feedback law's offsets turn the face normal by -(k_r r + k_v v) (small angles: within
    2 %), through the wrist alone, and clip the tilt at max_tilt."""
    with Runner(make_task("ball_bouncing")) as r:
        r.send(StartCommand(1, 1, context=np.array([0.45, 0.75, 0.03, -0.02, 0.05, 0.1])))
        task, model = r.task, r.sim.model
        data = copy.copy(r.sim.data)
    site, arm = model.site("racket_face").id, r.scene.qpos_adr
    for gains, expected in [((0.5, 0.0), [-0.015, 0.01]), ((0.0, 0.2), [-0.01, -0.02]),
                            ((0.5, 0.2), [-0.025, -0.01]), ((20.0, 0.0), [-0.6, 0.4])]:
        offsets = task.feedback(model, data, np.array(gains))
        assert np.all(offsets[:4] == 0.0)
        moved = copy.copy(data)
        moved.qpos[arm] += offsets
        mujoco.mj_kinematics(model, moved)
        normal = moved.site_xmat[site].reshape(3, 3)[:, 0]
        expected = np.array(expected)
        if np.hypot(*expected) > task.max_tilt:
            expected *= task.max_tilt / np.hypot(*expected)
        np.testing.assert_allclose(normal[:2], expected, rtol=0.02, atol=1e-5)
        np.testing.assert_allclose(moved.site_xpos[site], data.site_xpos[site], atol=0.01)  # turned, not moved


def run_reference(context=None, params: dict | None = None, **kw):
    with Runner(make_task("ball_bouncing", params or {}), keep_episodes=True) as r:
        replies = [r.send(c) for c in reference.reference_commands(r.robot, 1, context, params=params, **kw)]
        memory = r.task.episode
    return r.episodes[-1], replies, memory


@pytest.fixture(scope="module")
def reference_run():
    return run_reference()


def test_reference_bounces_the_ball_to_the_target_height(reference_run):
    ep, replies, memory = reference_run
    assert [x.flag for x in replies] == [Flag.OK] * 6 and replies[-1].episode_done
    assert ep.success and not memory.floored
    assert memory.best_run >= 15 and memory.good >= 15  # 19 measured in 12 s
    start = ball_rows(ep, 2)[0]
    target = start[COLUMNS.index("target_z")]
    assert target == pytest.approx(start[2] + 0.45)
    heights = np.array([a[1] for a in memory.apexes])
    good = np.array([a[2] for a in memory.apexes])
    assert heights[0] - start[2] == pytest.approx(reference.TOSS_APEX, abs=0.01)  # the toss: not a good bounce
    np.testing.assert_array_equal(good, np.abs(heights - target) <= 0.05)
    assert np.all(good[1:]) and np.abs(heights[1:] - target).mean() < 0.02
    # the return counts the good bounces less the sideways distances, which stay small
    rows = ball_rows(ep)
    on = col(rows, "on_racket") > 0
    assert col(rows, "lateral")[on].max() < 0.02
    assert memory.good - 0.2 < ep.episode_return < memory.good
    assert ep.episode_return == pytest.approx(18.95, abs=0.5)
    # the reward comes at the apexes only
    steps = ep.steps()
    assert np.count_nonzero(steps["reward"]) == len(memory.apexes)


@pytest.mark.parametrize("cuts", [[], [1], [700, 701, 2301], list(range(137, 6000, 411))])
def test_bounce_rewards_do_not_depend_on_how_the_steps_are_split(reference_run, cuts):
    """The reference's steps handed to a fresh episode's step_reward in other pieces than its
    segments (its memory carries a bounce across a cut) earn exactly what they earned; a gap in
    the steps (a real-time hold) loses the bounces in it and nothing else."""
    ep, _, memory = reference_run
    steps = ep.steps()
    rows = steps["index"] >= 2
    states, rewards, times = steps["task_state"][rows], steps["reward"][rows], steps["time"][rows]
    task = make_task("ball_bouncing")
    with Runner(task) as r:
        r.send(StartCommand(1, 1))
        model = r.sim.model

    def replay(pieces):
        task._episode = type(memory)(memory.ids)
        task.episode.last = (None, states[0, 2], 0.0, True, True, states[0, COLUMNS.index("lateral")])
        out = []
        for piece in pieces:
            view = StepView(np.zeros((len(piece), model.nq)), np.zeros((len(piece), model.nv)), times[piece, None],
                            np.zeros((len(piece), 7)), np.zeros((len(piece), 3)), 0.002, {"clock": slice(0, 1)})
            out.append(task.step_reward(view, states[piece]))
        return np.concatenate(out), task.episode

    edges = [0, *cuts, len(states)]
    got, again = replay([np.arange(a, b) for a, b in zip(edges[:-1], edges[1:])])
    np.testing.assert_array_equal(got, rewards)
    assert again.apexes == memory.apexes and again.best_run == memory.best_run
    # a hole of 0.3 s around the fourth apex: that bounce is lost, the others count as before
    apex = np.flatnonzero(rewards)[3]
    hole = np.arange(apex - 75, apex + 75)
    got, again = replay([np.arange(0, hole[0]), np.arange(hole[-1] + 1, len(states))])
    kept = np.setdiff1d(np.arange(len(states)), hole)
    np.testing.assert_array_equal(got, rewards[kept])
    assert len(again.apexes) == len(memory.apexes) - 1


def test_reference_bounces_on_with_a_late_noisy_tracker():
    """The mirror law fed the ball one 60 Hz frame late (17 ms) with 2 mm and 2 cm/s of noise:
    the reference still succeeds (measured: 19 good bounces in a row, return 18.73 against 18.98
    seen at once)."""
    ep, replies, memory = run_reference(params={"sensing_latency": 0.017, "sensing_noise": 0.002,
                                                "sensing_noise_rate": 0.02})
    assert replies[-1].flag == Flag.OK and ep.success and memory.best_run >= 15
    assert memory.good - 0.5 < ep.episode_return < memory.good  # the sideways distances cost 0.27
