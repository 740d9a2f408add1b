"""The ball_paddling task with real MuJoCo: the string (a tension-only spring-damper: the hanging
ball's period, static stretch and damping), the ball's bounce on the racket's face, the rules
that judge a hit, and the scripted rally (over the bridge and replayed:
tests/test_tasks_over_bridge.py)."""
from __future__ import annotations

import copy

import mujoco
import numpy as np
import pytest

from episodic.interface.commands import StartCommand, TrajectoryCommand
from episodic.interface.trajectory import min_jerk
from episodic.runtime.machine import Flag, MachineState
from episodic.runtime.runner import Runner
from episodic.task import StepView, contact
from episodic.tasks import TaskError, make_task
from examples import ball_paddling_reference as reference

G = 9.81
COLUMNS = ("ball_x", "ball_y", "ball_z", "ball_vx", "ball_vy", "ball_vz", "face_x", "face_y", "face_z",
           "height", "offset", "string", "touch")


def col(rows: np.ndarray, name: str) -> np.ndarray:
    return rows[:, COLUMNS.index(name)]


def motion_rows(ep, index: int | None = None) -> np.ndarray:
    """Task-state rows of the episode's segments (or of segment ``index``)."""
    steps = ep.steps()
    rows = steps["index"] >= 1 if index is None else steps["index"] == index
    return steps["task_state"][rows & (steps["machine_state"] == MachineState.DO_MOTION)]


def place_ball(runner: Runner, position) -> None:
    """Put the ball at rest at ``position`` between commands (a test's hand)."""
    sim = runner.sim
    joint = sim.model.joint("ball")
    qa, va = int(joint.qposadr[0]), int(joint.dofadr[0])
    sim.data.qpos[qa : qa + 3] = position
    sim.data.qpos[qa + 3 : qa + 7] = [1.0, 0.0, 0.0, 0.0]
    sim.data.qvel[va : va + 6] = 0.0
    sim.set_state(sim.get_state())


def hold(runner: Runner, episode_id: int, index: int, total: int, q, seconds: float):
    return runner.send(TrajectoryCommand(episode_id, index, total, np.asarray(q)[None], wait_time=seconds))


def test_task_declares_its_columns_context_and_parameters():
    task = make_task("ball_paddling")
    assert task.columns == COLUMNS
    assert "apex" in task.context_help and task.context_sizes == (0, 1)
    assert {"string_length", "string_stiffness", "string_damping", "ball_mass", "ball_radius", "restitution",
            "blade_radius", "hit_radius", "apex_height", "apex_tolerance", "penalty", "min_hits"} <= set(task.params())
    assert task.static_stretch == pytest.approx(0.015 * G / 30.0)
    assert task.bob_period == pytest.approx(0.1405, abs=1e-4)
    np.testing.assert_array_equal(task.default_context(), [0.45])
    assert make_task("ball_paddling", {"hit_radius": 0.2}).face_radius == task.blade_radius
    with pytest.raises(TaskError, match="string_length.*longer than ball_radius"):
        make_task("ball_paddling", {"string_length": "0.01"})
    with pytest.raises(TaskError, match="apex_height.*above string_length"):
        make_task("ball_paddling", {"string_length": "0.5"})
    assert make_task("ball_paddling", {"string_length": "0.5", "apex_height": "0.55"}).string_length == 0.5


def test_racket_is_part_of_the_arm_and_the_ball_rests_on_its_face():
    with Runner(make_task("ball_paddling")) as r:
        m, task = r.scene.model, r.task
        # the racket: in the arm's dynamics (gravity compensation included) with its whole mass
        racket = m.body("racket").id
        assert racket in r.scene.arm_bodies
        assert m.body_mass[racket] == r.scene.dynamics.body("racket").mass[0] == pytest.approx(
            task.blade_mass + task.handle_mass)
        # the ball touches, through calibrated pairs and nothing else, every robot geom (the
        # racket's and the arm's, contype 2) and the floor
        ball = m.geom("ball").id
        assert m.geom_contype[ball] == m.geom_conaffinity[ball] == 0
        partners = {m.geom(int(b if a == ball else a)).name for a, b in zip(m.pair_geom1, m.pair_geom2)
                    if ball in (a, b)}
        assert partners == {m.geom(int(g)).name for g in np.flatnonzero(m.geom_contype == 2)} | {"floor"}
        assert {"racket_blade", "racket_handle"} <= partners
        start = r.send(StartCommand(1, 1))
        assert start.flag == Flag.OK
        # on the face's centre, the face level, the string slack
        assert start.state[COLUMNS.index("height")] == pytest.approx(task.ball_radius, abs=1e-9)
        assert start.state[COLUMNS.index("offset")] == pytest.approx(0.0, abs=1e-9)
        reply = hold(r, 1, 1, 1, task.start_posture(r.robot), 1.0)
        rows = motion_rows(r.episodes[-1])
    assert reply.flag == Flag.OK and reply.reward == 0.0
    assert np.all(col(rows, "touch")[5:] == 1)  # resting on the face throughout
    assert np.abs(col(rows, "height") - task.ball_radius).max() < 1e-3
    assert col(rows, "offset").max() < 0.02  # it rolls a little: the held wrist gives under its weight
    assert col(rows, "string").max() < task.string_length


def test_bad_context_or_a_start_posture_without_the_face_up_is_refused():
    with Runner(make_task("ball_paddling")) as r:
        reply = r.send(StartCommand(1, 1, context=np.array([0.45, 0.1])))
        assert reply.flag == Flag.INVALID_PAYLOAD and "apex" in reply.message
        reply = r.send(StartCommand(2, 1, context=np.array([0.35])))
        assert reply.flag == Flag.INVALID_PAYLOAD and "above string_length" in reply.message
        face_down = r.task.start_posture(r.robot)
        face_down[6] = np.pi / 2
        reply = r.send(StartCommand(3, 1, posture=face_down))
        assert reply.flag == Flag.INVALID_PAYLOAD and "facing up" in reply.message
        reply = r.send(StartCommand(4, 1, context=np.array([0.5])))
        assert reply.flag == Flag.OK
        assert r.task.episode.target == 0.5


def bob(length: np.ndarray, dt: float, rest: float, periods: int = 8) -> tuple[float, float]:
    """Period s (mean over ``periods`` periods, from the up-crossings of the string's length
    through ``rest``, interpolated) and damping ratio (from the ratio of successive minima) of a
    bobbing string's ``length`` m sampled every ``dt`` s."""
    x = length - rest
    t = np.arange(len(x)) * dt
    up = np.flatnonzero((x[:-1] < 0) & (x[1:] >= 0))[: periods + 1]
    assert len(up) == periods + 1
    crossings = t[up] - x[up] * (t[up + 1] - t[up]) / (x[up + 1] - x[up])
    lows = np.array([x[a:b].min() for a, b in zip(up[:-1], up[1:])])
    decrement = -float(np.mean(np.diff(np.log(-lows))))
    return float(np.mean(np.diff(crossings))), decrement / np.sqrt(4 * np.pi**2 + decrement**2)


def test_hanging_ball_bobs_with_the_period_and_stretch_of_its_mass_on_the_string():
    """With the face turned down, the ball hangs below it at L + m g / k and, lifted 3 mm (less
    than the static stretch: the string stays taut), bobs with the period 2 pi sqrt(m/k) = 0.1405
    s. Held by the arm, the face gives a little (the ball pulls on the light wrist): measured
    0.1394 s, 0.8 % short, and the stretch within 1 %. With the arm made immovable (a copy of the
    scene's model whose arm joints have an armature of 1e4 kg m^2) the string alone: the period
    within 0.1 % (0.14054 s), and the damper, which acts only while the string lengthens, damps
    the bob about as a damping ratio of half ``string_damping`` would (0.0238 against 0.025)."""
    with Runner(make_task("ball_paddling")) as r:
        task, robot = r.task, r.robot
        r.send(StartCommand(1, 2))
        q = task.start_posture(robot)
        down = q.copy()
        down[6] = np.pi / 2  # j7 half a turn: the face down
        turn = min_jerk(q, down, 1.5, robot.control_dt)
        assert r.send(TrajectoryCommand(1, 1, 2, turn.q, turn.qd, turn.qdd)).flag == Flag.OK
        model, site = r.sim.model, r.sim.model.site("racket_face").id
        normal = r.sim.data.site_xmat[site].reshape(3, 3)[:, 0].copy()
        assert normal[2] < -0.999
        lifted = task.string_length + task.static_stretch - 0.003
        place_ball(r, r.sim.data.site_xpos[site] + normal * lifted)
        held = copy.copy(r.sim.data)
        hold(r, 1, 2, 2, down, 3.0)
        rows = motion_rows(r.episodes[-1], 2)
        fixed = copy.copy(model)
    # held by the arm: it hangs along gravity, swinging by under 1 cm (the wrist gives a few mrad)
    assert col(rows, "offset").max() < 0.01
    length = col(rows, "string")
    rest = length[-250:].mean()  # the bob has died down (the damper, pulling only, lifts a bobbing ball)
    assert rest - task.string_length == pytest.approx(task.static_stretch, rel=0.01)
    period, _ = bob(length, robot.control_dt, rest)
    assert period == pytest.approx(task.bob_period, rel=0.015)
    # the string alone: the arm immovable
    fixed.dof_armature[r.scene.dof_adr] = 1e4  # kg m^2: the face then weighs some 10^5 kg to the ball
    tendon, dt = fixed.tendon("string").id, fixed.opt.timestep
    lengths = []
    for _ in range(int(1.5 / dt)):
        mujoco.mj_step(fixed, held)
        lengths.append(held.ten_length[tendon])
    period, zeta = bob(np.array(lengths), dt, task.string_length + task.static_stretch)
    assert period == pytest.approx(task.bob_period, rel=0.001)
    assert zeta == pytest.approx(task.string_damping / 2, rel=0.1)


def face_mass(model: mujoco.MjModel, data: mujoco.MjData, site: int) -> float:
    """kg, the racket's effective mass at ``site`` along the vertical: 1 / (J M^-1 J^T), J the
    site's vertical velocity per joint rate (data's kinematics current)."""
    jacp = np.zeros((3, model.nv))
    mujoco.mj_jacSite(model, data, jacp, None, site)
    solved = np.zeros((1, model.nv))
    mujoco.mj_solveM(model, data, solved, jacp[2:3])
    return 1.0 / float(jacp[2] @ solved[0])


def test_the_ball_rebounds_off_the_face_with_the_restitution():
    """Dropped from rest onto the face's centre of the held racket from 6 heights (0.20-0.30 m:
    impacts of 2.0-2.4 m/s, falling at different points of a physics step):

    * relative to the face, the ball rebounds with ``restitution`` (0.7): the ratio of the
      relative normal speeds after and before the contact, at the physics step (a copy of the
      scene stepped by hand, the arm's controller holding), 0.684-0.705, each within 0.03 and
      their mean within 0.015;
    * in the world, less: the face gives, its effective mass at the centre being only M = 0.16 kg
      (the wrist's joints are light), and the ball rebounds as off a free body of that mass,
      (e M - m) / (M + m) = 0.553 (measured 0.56-0.58 from the rebound heights of the logged
      episode, corrected for air drag): each within 0.03 of it.

    (MuJoCo's default contact would give about 0: no bounce.)"""
    drops = np.linspace(0.20, 0.30, 6)
    total = len(drops) + 1
    with Runner(make_task("ball_paddling")) as r:
        task, q = r.task, r.task.start_posture(r.robot)
        r.send(StartCommand(1, total))
        hold(r, 1, 1, total, q, 0.3)
        model, site = r.sim.model, r.sim.model.site("racket_face").id
        still = copy.copy(r.sim.data)
        mass = face_mass(model, still, site)
        faces = []
        for k, drop in enumerate(drops):
            faces.append(r.sim.data.site_xpos[site][2])
            place_ball(r, r.sim.data.site_xpos[site] + [0.0, 0.0, task.ball_radius + drop])
            hold(r, 1, k + 2, total, q, 0.55)
        world = np.array([rebound(task, motion_rows(r.episodes[-1], k + 2), drop, face)
                          for k, (drop, face) in enumerate(zip(drops, faces))])
    e, m = task.restitution, task.ball_mass
    assert mass == pytest.approx(0.16, abs=0.01)
    assert np.all(np.abs(world - (e * mass - m) / (mass + m)) < 0.03), world
    ball = model.joint("ball")
    qa, va = int(ball.qposadr[0]), int(ball.dofadr[0])
    relative = []
    for drop in drops:
        data = copy.copy(still)
        data.qpos[qa : qa + 3] = data.site_xpos[site] + [0.0, 0.0, task.ball_radius + drop]
        speeds, touching = [], []
        while not (any(touching) and not touching[-1]):
            mujoco.mj_step(model, data)
            face = np.zeros(6)
            mujoco.mj_objectVelocity(model, data, mujoco.mjtObj.mjOBJ_SITE, site, face, 0)
            speeds.append(data.qvel[va + 2] - face[5])  # the face is level: its normal is the world's z
            touching.append(data.ncon > 0)
        first = touching.index(True)
        relative.append(-speeds[-1] / speeds[first - 1])
    relative = np.array(relative)
    assert np.all(np.abs(relative - e) < 0.03), relative
    assert relative.mean() == pytest.approx(e, abs=0.015), relative


def rebound(task, rows: np.ndarray, drop: float, face: float) -> float:
    """The world-frame restitution of the first bounce in ``rows`` of a ball dropped from rest
    ``drop`` m above the face, whose centre was at height ``face`` m: rebound launch speed over
    impact speed, from the drop and the rebound's apex heights, with a smooth sphere's quadratic
    air drag (episodic.task.contact's air and Cd): v^2 = g / kappa (1 - exp(-2 kappa h)) falling h
    from rest, h = ln(1 + kappa v^2 / g) / (2 kappa) rising from v, kappa = rho Cd A / (2 m)."""
    touch = col(rows, "touch")
    first = int(np.flatnonzero(touch == 1)[0])
    after = first + int(np.flatnonzero(touch[first:] == 0)[0])
    apex = col(rows, "ball_z")[after:].max() - face - task.ball_radius
    kappa = contact.AIR_DENSITY * contact.SPHERE_DRAG_COEFFICIENT * np.pi * task.ball_radius**2 / (2 * task.ball_mass)
    impact = np.sqrt(G / kappa * (1 - np.exp(-2 * kappa * drop)))
    launch = np.sqrt(G / kappa * (np.exp(2 * kappa * apex) - 1))
    return float(launch / impact)


# -- the rules that judge a hit, on made-up steps ------------------------------------------------
DT = 0.002
RESTING = (5, 1, 0.015, 0.015, 0.0)  # steps, touch, height m, string m, offset m


def made_up(*phases) -> np.ndarray:
    """Task-state rows of ``phases`` (steps, touch, height, string, offset), each held constant."""
    rows = [np.tile(np.array([0.0] * 9 + [height, offset, string, touch]), (steps, 1))
            for steps, touch, height, string, offset in phases]
    return np.vstack(rows)


def flight(height: float, string: float, steps: int = 150) -> tuple:
    return (steps, 0, height, string, 0.0)


def landing(touch: int = 1, offset: float = 0.01) -> tuple:
    return (3, touch, 0.015, 0.03, offset)


RALLY = [RESTING, flight(0.30, 0.30), landing(),  # a slack serve: 0
         (10, 0, 0.02, 0.03, 0.0), landing(),  # a 20 ms hop: the same touch, no hit
         flight(0.45, 0.46), landing(),  # +1
         flight(0.46, 0.47), landing(),  # +1
         flight(0.46, 0.47), landing(touch=-1),  # off the face (its rim, back or handle): -1
         flight(0.20, 0.20), landing(),  # slack after the serve: -1
         flight(0.52, 0.53), landing(),  # taut, but the apex out of the band: 0
         flight(0.45, 0.46), landing(offset=0.07),  # on the face, beyond hit_radius: -1
         flight(0.45, 0.46), landing()]  # +1
RALLY_REWARDS = [0.0, 1.0, 1.0, -1.0, -1.0, 0.0, -1.0, 1.0]


def judged(task, rows: np.ndarray, cuts=()) -> np.ndarray:
    """The task's step rewards for ``rows`` (a fresh episode, default context), handed to it in
    the pieces between ``cuts`` as segments would be."""
    from episodic.interface.robot import load_robot
    from episodic.runtime.scene import build_scene

    robot = load_robot("wam")
    scene = build_scene(robot, task)
    data = mujoco.MjData(scene.model)
    data.qpos[scene.qpos_adr] = task.start_posture(robot)
    task.reset(scene.model, data, np.zeros(0), np.random.default_rng(0))
    times = np.arange(len(rows)) * DT
    out = []
    for part in np.split(np.arange(len(rows)), list(cuts)):
        n = len(part)
        view = StepView(np.zeros((n, 1)), np.zeros((n, 1)), times[part, None], np.zeros((n, 7)), np.zeros((n, 3)),
                        DT, {"clock": slice(0, 1)})
        out.append(task.step_reward(view, rows[part]))
    return np.concatenate(out)


def test_each_hit_is_judged_by_its_place_and_the_flight_it_ends():
    task = make_task("ball_paddling", {"min_hits": 2})
    rows = made_up(*RALLY)
    rewards = judged(task, rows)
    hits = np.flatnonzero(rewards != 0)
    np.testing.assert_array_equal(rewards[rewards != 0], [r for r in RALLY_REWARDS if r != 0])
    assert np.all(col(rows, "touch")[hits] != 0)  # at the hit's first step
    rally = task.episode
    assert (rally.hits, rally.off_face, rally.slack, rally.missed, rally.best, rally.streak) == (3, 2, 1, 2, 2, 1)
    assert task.success(rows[-1])
    # the same steps cut into segments anywhere (mid-flight, mid-touch) are judged the same
    for cuts in ([1, 160, 170, 400], [7, 330, 331, 900, 1000]):
        np.testing.assert_array_equal(judged(make_task("ball_paddling", {"min_hits": 2}), rows, cuts), rewards)
    # the penalty is a parameter; ten good hits in a row are needed by default
    softer = make_task("ball_paddling", {"penalty": 0.5})
    np.testing.assert_array_equal(judged(softer, rows)[hits], [0.5 * r if r < 0 else r for r in RALLY_REWARDS
                                                              if r != 0])
    assert softer.episode.best == 2 and not softer.success(rows[-1])


# -- the scripted rally ------------------------------------------------------------------------
def run_reference(**kw):
    with Runner(make_task("ball_paddling")) as r:
        replies = [r.send(c) for c in reference.reference_commands(r.robot, 1, **kw)]
        rally = r.task.episode
    return r, replies, rally


def test_reference_rally_keeps_the_ball_going_in_the_band():
    r, replies, rally = run_reference()
    task, ep = r.task, r.episodes[-1]
    assert [x.flag for x in replies] == [Flag.OK] * len(replies) and replies[-1].episode_done
    assert ep.success and rally.best >= task.min_hits
    assert ep.episode_return == pytest.approx(15, abs=1)
    assert ep.episode_return == rally.hits and rally.off_face == rally.slack == 0
    steps = ep.steps()
    motion = steps["index"] >= 1
    rewards, rows = steps["reward"][motion], steps["task_state"][motion]
    assert set(np.unique(rewards)) == {0.0, 1.0}
    good = np.flatnonzero(rewards == 1)
    assert np.all(col(rows, "touch")[good] == 1) and col(rows, "offset")[good].max() < 0.01
    # each good hit ends a flight whose apex lies in the band and whose string was stretched
    for a, b in zip(good[:-1], good[1:]):
        assert abs(col(rows, "height")[a:b].max() - task.apex_height) < task.apex_tolerance
        assert task.string_length < col(rows, "string")[a:b].max() < task.string_length + 0.08
    # the rhythm: after a few hits, one every period of the stroke
    np.testing.assert_allclose(np.diff(good)[4:] * r.robot.control_dt, 1 / reference.FREQUENCY, atol=0.01)


def test_each_episode_starts_afresh_and_a_stroke_split_otherwise_rallies_alike():
    """The reward's memory belongs to the episode: the reference again (in 5 segments instead of
    3) in the same runner earns the same. (Cut elsewhere, the motion is not bit-identical: the
    reference ramps within each control step and holds at a segment's last, a difference of
    1e-9 m that the contacts amplify; the rules themselves are cut-proof, see
    test_each_hit_is_judged_by_its_place_and_the_flight_it_ends.)"""
    with Runner(make_task("ball_paddling")) as r:
        counts = []
        for episode_id, segments in ((1, 3), (2, 5)):
            replies = [r.send(c) for c in reference.reference_commands(r.robot, episode_id, segments=segments)]
            assert all(x.flag == Flag.OK for x in replies)
            rally = r.task.episode
            counts.append((rally.hits, rally.best, rally.off_face, rally.slack))
    one, two = r.episodes
    assert two.episode_return == one.episode_return and two.success
    assert counts[0] == counts[1]
