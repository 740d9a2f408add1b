"""A scripted beer-pong throw: a forward-down stroke of the shoulder, elbow and wrist pitch
(j2, j4, j6) that lets the ball go at its peak speed, so that it bounces once on the table and
drops into the cup.

The throw is planned in the vertical plane through the robot's base axis and the cup's axis by
the ball's release state: ``RELEASE_POINT`` (its centre's distance from the base axis and
height), ``RELEASE_VELOCITY`` (its speed toward the cup and up) and the flange's pitch
``RELEASE_PITCH``. The state was found by a small search on the task's model: free balls (the
task's ball, air drag, table and cup contacts) launched from a few release points at a grid of
velocities, scored by where they come down through the rim plane after one bounce; the point
and the velocity's direction chosen for the lowest joint rates the stroke then needs (j2 at 55 %
of its velocity limit), the speed in the middle of the range that ends in the cup at rest (for
the default cup at 1.6 m from the base axis, released 0.55 m out and 1.8 m up at -1.0 m/s:
1.53-1.62 m/s toward the cup). Drag matters: without air the same release comes down through
the rim plane 26 cm beyond the cup, and the release a drag-free search picks (1.30 m/s) comes
down 18 cm short of it in air.

1. Segment 1, a gain set: the robot's gains with the inverse dynamics of the planned motion as
   feedforward (held for no time), so that the arm tracks the fast stroke closely: the ball
   leaves within 3 mm and 0.02 m/s of the planned state (under gravity compensation alone the arm
   lags about 10 cm behind the plan and the ball leaves 0.4 m/s slower downward).
2. Segment 2 moves, minimum jerk in joint space, from the start posture to the back of the
   stroke.
3. Segment 3 is the stroke: a straight line in joint space through the release posture (found
   by inverse kinematics: the holder's site at the release point, the flange's axis at the
   release pitch, j1 turned toward the cup), along the joint rates of j2, j4, j6 that move the
   site at the release velocity (least squares in rate / velocity limit), on a minimum-jerk
   profile of ``STROKE_TIME`` s whose peak rate, at its middle, is those rates. The ball is let
   go at that middle step (the release time in the start command's context counts from the
   first step of the motion), and the arm holds the stroke's end while the ball flies and settles
   (the segment ends once the ball has lain in the cup at rest for the task's rest_time).

Other arms (the task places its table, cup and pads in the arm's frame: tasks/beer_pong.py).
``arm_commands``: the release point is the WAM's placed (its distance from the base axis scaled
by the reaches; its height the WAM's above the first joint scaled alike, at least ``ARM_LIFT``
over the table); for each upward speed of ``ARM_UPWARD`` the speed toward the cup is found by a
bisection on free throws in the task's scene, then the release posture by inverse kinematics of
the holder's site from seeded starts (the flange's axis within 60 degrees of the velocity, so the
ball leaves ahead of the hand), the joint rates of the least largest share of the velocity
limits, the stroke's ends inside the joint range and the arm off the table along it (after the
release the hand follows the ball down). The start command goes straight to the stroke's back,
the stroke is ``ARM_STROKE_TIME`` s. On the Puma 560 (release 0.44 m out, 2.06 m up, 1.04 m/s
toward the cup; 0.96 of its joints' velocity limits) it lands 2 mm from the cup's axis and the ball comes
to rest in it. The Panda's throws that keep its arm off the table need 1.7 times its velocity
limits (a release 0.13 m higher: about 2 times; those that hit the table saturate panda_joint6's
torque); the UR5, on the floor, releases 0.12 m over the table and needs 4.0 m/s toward the cup
there, 1.26 times its wrist joints' limits (the task's ``needs`` says so).

Only what a remote learner could know is used: the robot and task models and the context. A cup
elsewhere on the table at the default cup's distance from the base axis is aimed at by turning
j1; other distances are not reached.

The seed's harder surfaces (the task's ``table_tilt`` and ``pads``). On a slanted table the
bounce sends the ball off along the tilted normal, so the release speed toward the cup is found
again (``plan_release_speed``: a bisection on free throws of the task's ball in the task's scene,
the arm held at the release posture, scored by where the ball comes down through the cup's rim
plane after one bounce); the point and the upward speed stay. Measured (the test file): tilts of
-0.1, -0.05 and +0.05 rad land in the cup; at +0.1 rad and beyond +-0.1 no speed from 0.7 to 1.3
times the module's does with this release point and upward speed (a steeper or flatter throw
would: not searched). On a broken surface (``pads``) the throw lands in the cup when
a pad lies under its bounce (the task's default pad does: the bounce is at x 1.11 m); the
reference does not search for a throw that bounces on a pad elsewhere (that is a second unknown,
the upward speed, and is left to the learner), so with no pad under its bounce the ball falls
through and the throw is never scored. The throw scores 0.25 cm from the cup's axis and the ball
comes to rest in the cup. Perturbed (``python examples/beer_pong_reference.py --noise 30``: 30
copies per level): with the release time off by a normal error of 1, 2, 5, 10 ms (whole control
steps), 30, 30, 30, 29 of 30 still land in the cup; with the stroke's start and end postures off
by 0.005, 0.01, 0.02 rad on each of j2, j4, j6, 28, 27, 16 of 30.

    python examples/beer_pong_reference.py [--out runs/beer_pong_reference.h5] [--noise 30]

runs it in-process and prints the return, the scored distance and the simulation speed;
``--noise N`` prints the success rate of N copies with a perturbed release time and N with a
perturbed stroke per noise level (episodic.learning.noise).
"""
from __future__ import annotations

import argparse
import time

import mujoco
import numpy as np

from episodic.interface.commands import GainsCommand, StartCommand, TrajectoryCommand
from episodic.interface.robot import Robot, load_robot
from episodic.interface.trajectory import min_jerk, min_jerk_duration
from episodic.interface.vocabulary import Feedforward
from episodic.runtime.scene import build_scene
from episodic.task import TaskError
from episodic.task.frame import RobotFrame, least_share_rates, reference_frame, tool_ik
from episodic.tasks import make_task

RELEASE_POINT = (0.55, 1.80)       # m, the ball's centre at the release: from the base axis, height
RELEASE_VELOCITY = (1.575, -1.00)  # m/s, the ball's at the release: toward the cup, up (ballistic search)
RELEASE_PITCH = np.radians(-30.0)  # rad, the flange's axis at the release, above the horizontal toward the cup
STROKE_JOINTS = (1, 3, 5)          # j2, j4, j6: the stroke's joints
STROKE_TIME = 0.4                  # s, the stroke's minimum-jerk duration; the release at its middle
MIN_WINDUP_TIME = 1.0              # s, shortest move to the back of the stroke
FLIGHT_WAIT = 3.0                  # s, held after the stroke while the ball flies and settles


class HoldIK:
    """Damped-least-squares inverse kinematics of the holder's site "hold" (where the ball is
    held) and the flange's axis, on a private MjData, moving the joints ``joints`` only."""

    def __init__(self, robot: Robot, task):
        scene = build_scene(robot, task)
        self.model, self.data = scene.model, mujoco.MjData(scene.model)
        self.qpos_adr, self.dof_adr = scene.qpos_adr, scene.dof_adr
        self.lower, self.upper = robot.range_lower, robot.range_upper
        self.site, self.flange = self.model.site("hold").id, self.model.site(robot.end_effector_site).id
        self._jp, self._jr = np.zeros((3, self.model.nv)), np.zeros((3, self.model.nv))

    def pose(self, q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The site's position (3,) m and the flange's axis (3,) at posture q."""
        self.data.qpos[self.qpos_adr] = q
        mujoco.mj_kinematics(self.model, self.data)
        return self.data.site_xpos[self.site].copy(), self.data.site_xmat[self.flange].reshape(3, 3)[:, 2].copy()

    def jacobian(self, q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(3, n_dofs) each: the site's velocity m/s and the hand's angular velocity rad/s per joint rate."""
        self.pose(q)
        mujoco.mj_comPos(self.model, self.data)
        mujoco.mj_jacSite(self.model, self.data, self._jp, self._jr, self.site)
        return self._jp[:, self.dof_adr].copy(), self._jr[:, self.dof_adr].copy()

    def solve(self, q0: np.ndarray, position: np.ndarray, axis: np.ndarray, joints, iterations: int = 300,
              weight: float = 0.3) -> np.ndarray:
        """Posture near q0 (moving ``joints``) putting the site at ``position`` and the flange's
        axis along ``axis``; ValueError when out of reach."""
        q, joints = np.asarray(q0, float).copy(), list(joints)
        for _ in range(iterations):
            x, a = self.pose(q)
            error = np.concatenate([position - x, weight * np.cross(a, axis)])
            if np.linalg.norm(error) < 1e-9:
                return q
            jp, jr = self.jacobian(q)
            J = np.vstack([jp, weight * jr])[:, joints]
            step = J.T @ np.linalg.solve(J @ J.T + 1e-4 * np.eye(6), error)
            q[joints] = np.clip(q[joints] + step * min(1.0, 0.2 / np.max(np.abs(step))),
                                self.lower[joints], self.upper[joints])
        raise ValueError(f"the release pose {np.round(position, 3).tolist()} is out of the holder's reach")


def throw_plane(cup_xy) -> tuple[float, np.ndarray]:
    """The azimuth rad of the cup seen from the base axis and the unit horizontal direction toward it."""
    psi = float(np.arctan2(cup_xy[1], cup_xy[0]))
    return psi, np.array([np.cos(psi), np.sin(psi), 0.0])


def stroke(robot: Robot, task, cup_xy, velocity, point) -> tuple:
    """The release posture (n_dofs,) rad, the joint rates (n_dofs,) rad/s at the release and the
    stroke's minimum-jerk profile s(t) (its q: joint-space distance along those rates in units
    of 1 s, from -STROKE_TIME/3.75 to +STROKE_TIME/3.75, peak rate 1 at the middle)."""
    ik = HoldIK(robot, task)
    psi, toward = throw_plane(cup_xy)
    q0 = task.start_posture(robot)
    q0[0] = psi
    axis = np.cos(RELEASE_PITCH) * toward + [0.0, 0.0, np.sin(RELEASE_PITCH)]
    release = ik.solve(q0, point[0] * toward + [0.0, 0.0, point[1]], axis, STROKE_JOINTS)
    J = ik.jacobian(release)[0][:, list(STROKE_JOINTS)]
    scale = np.diag(robot.velocity_limit[list(STROKE_JOINTS)])
    rates = np.zeros(robot.n_dofs)
    rates[list(STROKE_JOINTS)] = scale @ np.linalg.pinv(J @ scale) @ (velocity[0] * toward + [0, 0, velocity[1]])
    half = STROKE_TIME / 3.75  # a minimum-jerk move of length L over T peaks at 1.875 L / T
    return release, rates, min_jerk(np.array([-half]), np.array([half]), STROKE_TIME, robot.control_dt)


def throw_miss(robot: Robot, task, cup, velocity, point=RELEASE_POINT, scene=None) -> float:
    """m, where a ball let go at the release state (``point``, ``velocity``: module docstring)
    toward ``cup`` (x, y) m comes down through the cup's rim plane after one table bounce, along
    the throw's direction from the cup's axis (negative: short); nan when it never does. A free
    throw in the task's scene (its ball, air and table; the cup taken away, so that a throw that
    would strike its rim or wall is scored by where it would pass, as a smooth function of the
    speed), the arm held at the release posture, run for at most ``FLIGHT_WAIT`` s. ``scene``: the
    task's (None: built here)."""
    scene = build_scene(robot, task) if scene is None else scene
    toward = throw_plane(cup)[1]
    q = stroke(robot, task, cup, velocity, point)[0]
    return _free_throw(scene, robot, task, q, cup, point[0] * toward + [0.0, 0.0, point[1]],
                       velocity[0] * toward + [0.0, 0.0, velocity[1]], toward)


def plan_release_speed(robot: Robot, task, cup, point=RELEASE_POINT, tolerance: float = 0.002,
                       jump: float = 0.01) -> tuple:
    """The release velocity (toward the cup, up) m/s whose throw comes down through the rim
    plane on the cup's axis (within ``tolerance`` m along the throw; where the bounce falls within
    a physics step moves the landing in jumps of up to 3 cm as the speed changes, so when the
    bisection closes on a jump that straddles the axis, the speed tried that came nearest, if
    within ``jump`` m): the upward speed the
    module's, the speed toward the cup by bisection between 0.7 and 1.3 times the module's
    (``throw_miss``); ValueError when no speed in that range lands there."""
    low, high = 0.7 * RELEASE_VELOCITY[0], 1.3 * RELEASE_VELOCITY[0]
    scene = build_scene(robot, task)
    nearest = (np.inf, 0.0)
    for _ in range(30):
        middle = (low + high) / 2
        miss = throw_miss(robot, task, cup, (middle, RELEASE_VELOCITY[1]), point, scene)
        if abs(miss) < tolerance:
            return middle, RELEASE_VELOCITY[1]
        nearest = min(nearest, (abs(miss), middle))
        if miss < 0:  # short (a nan, a second bounce first, counts as long: the ball ran on)
            low = middle
        else:
            high = middle
    if nearest[0] < jump:
        return nearest[1], RELEASE_VELOCITY[1]
    raise ValueError(f"no release speed toward the cup between {0.7 * RELEASE_VELOCITY[0]:.3g} and "
                     f"{1.3 * RELEASE_VELOCITY[0]:.3g} m/s brings the ball down on the cup's axis")


def reference_commands(robot: Robot | str = "wam", episode_id: int = 1, cup=None, params: dict | None = None,
                       velocity=None, point=None, release_shift: int = 0, offsets=None) -> list:
    """The reference episode as episodic.interface.commands objects: StartCommand (context = [release
    time, cup_x, cup_y]), the gain set, the wind-up and the stroke. ``cup``: (cup_x, cup_y) m,
    or None for the task's default cup; ``params``: the task's parameters (None: its defaults).
    ``velocity`` and ``point`` replace the release state's (without a velocity: the module's on
    a level table, ``plan_release_speed``'s on a slanted one), ``release_shift`` (control steps
    later) and ``offsets`` ((2, n_dofs) rad added to the stroke's start and end postures,
    blended along its profile) perturb it (the noise table)."""
    robot = load_robot(robot) if isinstance(robot, str) else robot
    task = make_task("beer_pong", params)
    if not RobotFrame.of(robot).is_reference():
        return arm_commands(robot, task, episode_id, cup)
    cup = np.array([task.cup_x, task.cup_y] if cup is None else cup, float)
    point = RELEASE_POINT if point is None else point
    if velocity is None:
        velocity = RELEASE_VELOCITY if task.table_tilt == 0 else plan_release_speed(robot, task, cup, point)
    release, rates, s = stroke(robot, task, cup, velocity, point)
    if offsets is not None:  # a joint-space error growing from the start's to the end's along the stroke
        span = s.q[-1] - s.q[0]
        shift = offsets[1] - offsets[0]
        release = release + offsets[0] - s.q[0] / span * shift
        rates = rates + shift / span
    q_stroke = release + s.q * rates
    q_stroke_d, q_stroke_dd = s.qd * rates, s.qdd * rates
    start = task.start_posture(robot)
    goto = robot.goto
    windup_time = max(MIN_WINDUP_TIME, min_jerk_duration(start, q_stroke[0], goto.max_velocity, goto.max_acceleration))
    windup = min_jerk(start, q_stroke[0], windup_time, robot.control_dt)
    release_step = len(windup.q) + len(s.q) // 2 + release_shift
    context = [release_step * robot.control_dt, *cup]
    return [
        StartCommand(episode_id, 3, context=np.array(context)),
        GainsCommand(episode_id, 1, 3, robot.kp, robot.kd, feedforward=Feedforward.FEEDFORWARD),
        TrajectoryCommand(episode_id, 2, 3, windup.q, windup.qd, windup.qdd),
        TrajectoryCommand(episode_id, 3, 3, q_stroke, q_stroke_d, q_stroke_dd, wait_time=FLIGHT_WAIT),
    ]


ARM_UPWARD = (RELEASE_VELOCITY[1], 0.0)  # m/s, the upward release speeds an arm other than the WAM tries
ARM_SEEDS = 64                    # seeded postures (and the home) its release posture is searched from
ARM_STROKE_TIME = 0.6             # s, the stroke's duration on an arm other than the WAM
ARM_AHEAD = 0.5                   # the least cosine of the flange's axis to the release velocity (the ball ahead)
ARM_END_MARGIN = 0.15            # rad, the least room the stroke's ends leave to the joint range
ARM_LIFT = 0.12                   # m, the least height of the release point over the table (an arm short of the WAM's)


def _free_throw(scene, robot: Robot, task, q, cup, position, velocity, toward) -> float:
    """m, where a ball let go at ``position`` (3,) m with ``velocity`` (3,) m/s comes down through
    the rim plane of the cup at ``cup`` (x, y) m after one table bounce, along ``toward`` (3,: a
    horizontal unit vector) from the cup's axis (negative: short); nan when it never does (a ball
    below the table never does). The cup taken away (a throw that would strike it is scored where
    it would pass), the arm held at ``q`` (n_dofs,) rad, at most ``FLIGHT_WAIT`` s."""
    model, data = scene.model, mujoco.MjData(scene.model)
    data.qpos[scene.qpos_adr] = q
    data.ctrl[scene.actuator] = robot.kp * q  # the controller's hold: ctrl - kp q - kd qd, gravity compensated
    try:
        task.reset(model, data, np.array([0.0, *cup]), np.random.default_rng(0))
    except TaskError:  # the ball held against the arm: it is placed below, its start is all that counts here
        pass
    data.act[:] = 0.0  # let go (the hold's activations are the model's only ones)
    foot = data.mocap_pos[0].copy()  # the cup (the scene's only mocap body), then taken 10 m down
    data.mocap_pos[0, 2] -= 10.0
    ball = model.joint("ball")
    qa, va = int(ball.qposadr[0]), int(ball.dofadr[0])
    data.qpos[qa : qa + 3] = position
    data.qvel[va : va + 6] = [*velocity, 0.0, 0.0, 0.0]
    mujoco.mj_forward(model, data)
    touch = scene.sensors["bp_on_table"]
    bounces, touching, height = 0, False, np.inf
    for _ in range(int(FLIGHT_WAIT / model.opt.timestep)):
        mujoco.mj_step(model, data)
        now = data.sensordata[touch][0] > 0
        bounces += now and not touching
        touching = now
        local = task.cup_coordinates(data.qpos[qa : qa + 3][None], foot[None])[0]
        before, height = height, local[2] - task.cup_height
        if bounces > 1 or data.qpos[qa + 2] < task.table_height - 0.1:
            return float("nan")
        if bounces == 1 and before > 0 >= height:
            return float((data.qpos[qa : qa + 3] - foot) @ toward)
    return float("nan")


def _stroke_clear(scene, data, q, rates, samples: int = 13) -> bool:
    """Whether the arm touches nothing (the table, the floor, the cup: every contact but the
    ball's) at ``samples`` postures along the stroke through ``q`` (n_dofs,) rad along ``rates``
    (n_dofs,) rad/s (``ARM_STROKE_TIME`` s of a minimum-jerk profile peaking at them): after the
    release the hand follows the ball down toward the table."""
    ball = scene.model.geom("ball").id
    for t in np.linspace(-1.0, 1.0, samples) * ARM_STROKE_TIME / 3.75:
        data.qpos[scene.qpos_adr] = q + t * rates
        mujoco.mj_forward(scene.model, data)
        if any(ball not in (c.geom1, c.geom2) for c in data.contact[: data.ncon]):
            return False
    return True


def arm_release(robot: Robot, task, cup) -> tuple:
    """The release of a throw by an arm other than the WAM toward the cup at ``cup`` (x, y) m
    (the task's scene built for ``robot``): the ball's centre ``RELEASE_POINT`` placed (its
    distance from the base axis scaled by the reaches, RobotFrame; its height the WAM's above the
    first joint scaled alike, but at least ``ARM_LIFT`` over the table); for each upward speed of
    ``ARM_UPWARD`` the speed toward the cup that brings the ball down on the cup's axis after one
    bounce (a bisection on free throws, :func:`_free_throw`), then the posture that gives it:
    the holder's site at the point, the flange's axis within 60 degrees of the velocity
    (``ARM_AHEAD``: the ball ahead of the hand, which slows down behind it), the joint rates of the
    least largest share of the velocity limits (least_share_rates) from ``ARM_SEEDS`` seeded
    inverse kinematics starts. Returns (release posture (n_dofs,) rad, joint rates (n_dofs,)
    rad/s, velocity (3,) m/s, share) of the least share; ValueError when no throw lands."""
    frame, wam = RobotFrame.of(robot), reference_frame()
    scale = frame.reach / wam.reach
    toward = np.array([*(np.asarray(cup) - frame.anchor[:2]), 0.0])
    toward /= np.linalg.norm(toward)
    height = max(frame.anchor[2] + scale * (RELEASE_POINT[1] - wam.anchor[2]), task.table_height + ARM_LIFT)
    point = np.array([*(frame.anchor[:2] + scale * RELEASE_POINT[0] * toward[:2]), height])
    scene = build_scene(robot, task)
    ik = tool_ik(robot, task.add_tool, "hold")
    starts = np.vstack([robot.home, np.random.default_rng(0).uniform(robot.range_lower, robot.range_upper,
                                                                     (ARM_SEEDS, robot.n_dofs))])
    candidates: list[tuple] = []
    for up in ARM_UPWARD:
        low, high, speed = 0.3, 4.0, None
        for _ in range(16):
            middle = (low + high) / 2
            miss = _free_throw(scene, robot, task, robot.home, cup, point, middle * toward + [0.0, 0.0, up], toward)
            if abs(miss) < 0.003:
                speed = middle
                break
            low, high = (middle, high) if miss < 0 else (low, middle)
        if speed is None:
            continue
        velocity = speed * toward + [0.0, 0.0, up]
        for start in starts:
            q, error = ik.solve(start, point, iterations=200)
            if (error > 1e-6 or np.any(q < robot.range_lower + 0.3) or np.any(q > robot.range_upper - 0.3)
                    or ik.pose(q, np.array([0.0, 0.0, 1.0]))[1] @ velocity < ARM_AHEAD * np.linalg.norm(velocity)):
                continue
            try:
                rates = least_share_rates(ik.jacobian(q)[:3], velocity, robot.velocity_limit)
            except ValueError:
                continue
            ends = q + np.outer([-1.0, 1.0], rates) * ARM_STROKE_TIME / 3.75  # the stroke's start and end
            if np.any(ends < robot.range_lower + ARM_END_MARGIN) or np.any(ends > robot.range_upper - ARM_END_MARGIN):
                continue
            share = float(np.max(np.abs(rates) / robot.velocity_limit))
            candidates.append((share, len(candidates), q, rates, velocity))
    data = mujoco.MjData(scene.model)
    for share, _, q, rates, velocity in sorted(candidates, key=lambda c: c[:2]):
        try:  # the held ball clear of everything at the stroke's start (the task refuses a start where it touches)
            data.qpos[scene.qpos_adr] = q - rates * ARM_STROKE_TIME / 3.75
            task.reset(scene.model, data, np.array([0.0, *cup]), np.random.default_rng(0))
        except TaskError:
            continue
        if _stroke_clear(scene, data, q, rates):
            return q, rates, velocity, share
    raise ValueError(f"no throw from {np.round(point, 3).tolist()} m lands in the cup at "
                     f"{np.round(cup, 3).tolist()} m for {robot.name}")


def arm_commands(robot: Robot, task, episode_id: int = 1, cup=None) -> list:
    """The reference episode on an arm other than the WAM (:func:`arm_release`), as
    reference_commands: the start command goes to the back of the stroke (a posture the task's
    start check accepts: the held ball clear), the gain set with the motion's inverse dynamics,
    and the stroke: a straight line in joint space through the release posture along the
    release's joint rates, on a minimum-jerk profile of ``ARM_STROKE_TIME`` s peaking at them at
    its middle, where the ball is let go. ``cup``: (x, y) m, world frame (None: the task's default
    cup placed for the arm)."""
    build_scene(robot, task)  # the scene placed for the robot
    cup = task.default_context()[1:] if cup is None else np.asarray(cup, float)
    release, rates, _, _ = arm_release(robot, task, cup)
    half = ARM_STROKE_TIME / 3.75
    s = min_jerk(np.array([-half]), np.array([half]), ARM_STROKE_TIME, robot.control_dt)
    q_stroke, q_stroke_d, q_stroke_dd = release + s.q * rates, s.qd * rates, s.qdd * rates
    release_step = len(s.q) // 2
    return [
        StartCommand(episode_id, 2, posture=q_stroke[0], context=np.array([release_step * robot.control_dt, *cup])),
        GainsCommand(episode_id, 1, 2, robot.kp, robot.kd, feedforward=Feedforward.FEEDFORWARD),
        TrajectoryCommand(episode_id, 2, 2, q_stroke, q_stroke_d, q_stroke_dd, wait_time=FLIGHT_WAIT),
    ]


NOISE_TIME = (1, 2, 5, 10)            # ms, standard deviation of the release time
NOISE_STROKE = (0.005, 0.01, 0.02)    # rad, on j2, j4, j6 at the stroke's start and end


def main() -> None:
    from episodic.runtime.runner import Runner

    parser = argparse.ArgumentParser(description="Run the scripted beer-pong throw and log it.")
    parser.add_argument("--out", default=None, help="HDF5 log to write, replaced if it exists (default: none)")
    parser.add_argument("--noise", type=int, default=0, metavar="N",
                        help="also print the success rate of N perturbed copies per noise level")
    args = parser.parse_args()
    with Runner(make_task("beer_pong"), log=args.out, keep_episodes=True, overwrite=True) as runner:
        commands = reference_commands(runner.robot, 1)
        wall = time.perf_counter()
        replies = [runner.send(c) for c in commands]
        wall = time.perf_counter() - wall
        scored = runner.task.scored_distance()
    ep = runner.episodes[-1]
    steps, sim_time = ep.n_steps, ep.n_steps * runner.robot.control_dt
    print(f"flags {[r.flag.name for r in replies]}; return {ep.episode_return:.4f}; scored {scored:.4f} m from "
          f"the cup's axis; success {ep.success}")
    print(f"{steps} steps ({sim_time:.2f} s simulated) in {wall:.3f} s: {steps / wall:,.0f} steps/s, "
          f"{sim_time / wall:.0f}x real time")
    if args.noise:
        from episodic.learning.noise import noise_table, print_noise_table

        robot = load_robot("wam")
        joints = list(STROKE_JOINTS)

        def late(rng, level):
            return reference_commands(robot, release_shift=int(round(rng.normal(0, level) * 1e-3 / robot.control_dt)))

        def off(rng, level):
            offsets = np.zeros((2, robot.n_dofs))
            offsets[:, joints] = rng.normal(0, level, (2, len(joints)))
            return reference_commands(robot, offsets=offsets)

        print(f"release time perturbed ({args.noise} copies per level):")
        print_noise_table(noise_table("beer_pong", late, NOISE_TIME, n=args.noise), "ms")
        print(f"stroke perturbed on j2, j4, j6 at its start and end ({args.noise} copies per level):")
        print_noise_table(noise_table("beer_pong", off, NOISE_STROKE, n=args.noise), "rad")


if __name__ == "__main__":
    main()
