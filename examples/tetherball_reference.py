"""A scripted tetherball stroke: move the racket behind the hanging ball, then hit it so that
it swings up through the target.

The ball hangs still at the start, so a reachable target is a point of the sphere of the
string's length around the anchor, above the ball's rest position: a ball hit horizontally
toward the target's azimuth with speed v swings, string taut, in the vertical plane through
the anchor and the target and rises v^2 / 2g; if that apex lies above the target, the arc
passes through it. The racket points away from the robot, so the strokes are sideways:
targets whose azimuth around the anchor lies within about 30 degrees of the +y or -y
direction (seen from the robot: to its left or right) and up to about 50 degrees of swing
are reached; straight ahead or back toward the robot are not.

1. Segment 1 moves, minimum jerk in joint space, to the backswing posture, passing below
   the ball (down, across, up): the blade's centre ``BACKSWING`` m behind the ball's rest
   position, opposite the target's azimuth.
2. Segment 2 is the stroke: a straight line in joint space through the impact posture (found
   by inverse kinematics: the blade's centre at the ball's rest position, its face normal
   toward the target's azimuth) along the joint rates that move the blade at 1 m/s toward
   the target's azimuth without turning it, spread over the joints in proportion to their
   velocity limits (where that would take a joint past ``SPEED_SHARE`` of its limit at the
   stroke's peak, as on the Panda and the Puma 560, the rates that move the blade's centre along
   that direction with the smallest largest share of the limits: episodic.task.frame.least_share_rates,
   the racket turning a little). The stroke follows a minimum-jerk profile whose peak speed (at the ball)
   is the ball speed needed to rise ``APEX_MARGIN`` m above the target, divided by ``GAIN``
   (ball speed / blade speed in the impact, found by a small search over the strokes of
   several targets and frozen here). It then pulls the racket down and back out of the
   ball's plane of swing and holds ``FLIGHT_WAIT`` s while the ball swings up and back.

A moving target (the task's ``target_speed``: it circles the anchor's vertical axis) is met
where it crosses straight sideways of the anchor (azimuth +90 or -90 degrees, the strokes'
best): the stroke for a still target there is planned as above, and segment 1 holds the
backswing posture long enough that the ball, hit at the stroke's middle and swinging up as a
pendulum of the loaded string's length (``swing_time``), passes that point as the target does,
at its first such pass that the stroke can still make. (Drag and the string's stretch are left
out of the prediction; measured: the closest approach stays within the tolerance, the test file.)

Continuous play (the task's ``approaches`` N > 1): the string is nearly lossless, so the ball hit
once swings back to a still target by itself, each swing about 1 cm lower at its apex (air
drag). The reference for N approaches is the same stroke, the final wait lengthened by N - 1
periods of a pendulum of the loaded string's length swinging up to the planned apex
(``swing_period``), so that the N-th approach's closest point falls inside it. Measured
(tests/test_task_tetherball.py): with the default target all of up to 8 approaches pass within
the tolerance; from the 9th the ball no longer rises to the target. A return stroke that would
put back what the air takes (a tap at the turning point on the robot's side, timed from the
ball's state in the last reply) is not built; with a moving target the ball's plane of swing
does not follow it, so after the first approach the target is missed.

On any arm (the task places the ball, the string and the target in the robot's frame, and its
start posture holds the racket where the WAM's is, placed likewise) the same plan runs from the
task's numbers: the approach passes less far below the ball where the blade would come within
``FLOOR_CLEARANCE`` of the floor (the UR5 stands on it), and the retract pulls toward the arm's
first joint. Returns (tests/test_task_robots.py): WAM -0.0256, Panda -0.0410, UR5 -0.0150,
Puma 560 -0.0627, each within the tolerance.

Only what a remote learner could know is used: the robot and task models (for kinematics)
and the target (with its motion, from the task's parameters). ``reference_commands`` returns the episode's commands;

    python examples/tetherball_reference.py [--out runs/tetherball_reference.h5] [--target X Y Z] [--approaches N]

runs them in-process and prints the return, each approach's closest distance and the simulation speed.
"""
from __future__ import annotations

import argparse
import time

import numpy as np
from scipy.integrate import quad
from scipy.special import ellipk

from episodic.interface.commands import StartCommand, TrajectoryCommand
from episodic.interface.robot import Robot, load_robot
from episodic.interface.trajectory import Desired, min_jerk, min_jerk_duration
from episodic.runtime.scene import build_scene
from episodic.task.frame import RobotFrame, least_share_rates
from episodic.task.kinematics import SiteIK
from episodic.tasks import make_task

BACKSWING = 0.35       # m, blade centre behind the ball before the stroke
FOLLOW_THROUGH = 0.35  # m, blade centre past the ball's rest position at the stroke's end
GAIN = 1.9             # ball speed after the impact / blade speed (searched; see the docstring)
APEX_MARGIN = 0.05     # m, the swing's apex above the target
RETRACT = (0.25, 0.25)  # m, the racket's final pull back toward the robot and down
RETRACT_TIME = 0.8     # s
APPROACH_DROP = 0.35   # m, the approach passes this far below the start and backswing points
FLOOR_CLEARANCE = 0.1  # m, the blade's edge stays at least this high above the floor (z = 0) in the approach
MIN_MOVE_TIME = 0.5    # s, shortest of the approach's three moves
FLIGHT_WAIT = 0.5      # s, held at the end while the ball flies
GRAVITY = 9.81
SPEED_SHARE = 0.9      # of a joint's velocity limit the stroke may plan: a tenth spare for the tracking's overshoot


def stroke_plan(task, target: np.ndarray) -> tuple[np.ndarray, np.ndarray, float]:
    """Where and how fast to hit: the ball's rest position (3,) m, the unit horizontal
    direction (3,) toward the target's azimuth, and the blade's peak speed m/s."""
    rest = task.rest_position
    towards = np.asarray(target, float) - task.anchor
    towards[2] = 0.0
    if np.linalg.norm(towards) < 1e-6:
        raise ValueError("the target lies straight below or above the anchor: no swing reaches it")
    rise = max(float(target[2] - rest[2]), 0.0) + APEX_MARGIN
    return rest, towards / np.linalg.norm(towards), np.sqrt(2 * GRAVITY * rise) / GAIN


def swing_time(task, target: np.ndarray) -> float:
    """s from the hit (the ball at its rest position, sent off at the stroke's planned speed
    toward ``target`` (3,) m) until it reaches the target's height, swinging as a pendulum of the
    loaded string's length: t = integral of l dtheta / sqrt(v^2 - 2 g l (1 - cos theta)) up to the
    target's angle from the vertical."""
    rest = task.rest_position
    length = task.anchor[2] - rest[2]
    speed = GAIN * stroke_plan(task, target)[2]
    angle = np.arccos(np.clip((task.anchor[2] - target[2]) / length, -1.0, 1.0))
    return quad(lambda a: length / np.sqrt(speed**2 - 2 * GRAVITY * length * (1 - np.cos(a))), 0.0, angle)[0]


def swing_period(task, target: np.ndarray) -> float:
    """s, the period of the swing the stroke for ``target`` (3,) m plans: a pendulum of the loaded
    string's length l swinging up to the angle theta_0 of the planned apex (``APEX_MARGIN`` above
    the target), T = 4 sqrt(l / g) K(sin^2(theta_0 / 2)) with K the complete elliptic integral of
    the first kind (parameter m)."""
    length = task.anchor[2] - task.rest_position[2]
    apex = max(float(target[2]), task.rest_position[2]) + APEX_MARGIN
    amplitude = np.arccos(np.clip((task.anchor[2] - apex) / length, -1.0, 1.0))
    return 4.0 * np.sqrt(length / GRAVITY) * float(ellipk(np.sin(amplitude / 2) ** 2))


def meet_moving_target(robot: Robot, task, start: np.ndarray, episode_id: int) -> list:
    """The reference for the target that starts at ``start`` (3,) m and circles the anchor's axis
    (module docstring): the stroke for a still target where it passes straight sideways of the
    anchor (seen from the robot: along the sideways axis of its facing), segment 1 held until the
    stroke meets it there; ValueError for a target on the axis."""
    offset = start[:2] - task.anchor[:2]
    radius = float(np.hypot(*offset))
    if radius < 1e-6:
        raise ValueError("the target lies on the anchor's vertical axis: it does not move, and no swing reaches it")
    phase, omega = float(np.arctan2(offset[1], offset[0])), task.target_speed
    best = None
    facing = RobotFrame.of(robot).rotation  # straight sideways of the robot's facing: world +-y on the WAM
    heading = float(np.arctan2(facing[1, 0], facing[0, 0]))
    for side in (heading + np.pi / 2, heading - np.pi / 2):
        point = task.target_at(start, [(side - phase) / omega])[0]  # where it passes that side
        commands = reference_commands(robot, episode_id, point, task.params() | {"target_speed": 0.0})
        start_cmd, approach, stroke = commands
        hit = (len(approach.q) + len(stroke.q[: np.argmax(np.linalg.norm(stroke.qd, axis=1)) + 1])) * robot.control_dt
        meet = hit + swing_time(task, point)
        turns = np.ceil((meet * omega - (side - phase)) / (2 * np.pi)) if omega > 0 else \
            np.ceil(((side - phase) - meet * omega) / (2 * np.pi))
        passes = (side - phase + 2 * np.pi * turns * np.sign(omega)) / omega  # the first pass at or after meet
        if best is None or passes < best[0]:
            best = (passes, approach.wait_time + passes - meet, commands)
    _, wait, (start_cmd, approach, stroke) = best
    return [StartCommand(episode_id, 2, context=np.asarray(start, float)),
            TrajectoryCommand(episode_id, 1, 2, approach.q, approach.qd, approach.qdd, wait_time=wait), stroke]


def reference_commands(robot: Robot | str = "wam", episode_id: int = 1, target=None,
                       params: dict | None = None) -> list:
    """The reference episode for ``target`` (3,) m (None: the task's default target; for a moving
    target, where it starts), as episodic.interface.commands objects: StartCommand (context = target), the
    approach and the stroke, whose final wait covers the task's ``approaches`` (module docstring);
    ``params``: the task's parameters (None: its defaults)."""
    robot = load_robot(robot) if isinstance(robot, str) else robot
    task = make_task("tetherball", params)
    scene = build_scene(robot, task)  # the scene placed for the robot: its anchor and default target
    target = task.default_target if target is None else np.asarray(target, float)
    if task.target_speed != 0:
        return meet_moving_target(robot, task, target, episode_id)
    ik = SiteIK(scene.model, "racket_centre", scene.qpos_adr, scene.dof_adr, robot.range_lower, robot.range_upper)
    rest, u, speed = stroke_plan(task, target)
    dt = robot.control_dt

    # the impact posture: blade centre at the ball's rest position, face normal toward the target
    q_start = task.start_posture(robot)
    q_contact, err = ik.solve(q_start, rest, u)
    if err > 1e-4:
        raise ValueError(f"the ball's rest position is out of the racket's reach (error {err:.3g})")
    # joint rates w moving the blade centre at 1 m/s along u without turning the racket, least
    # squares in q_dot / velocity limit
    scale = np.diag(robot.velocity_limit)
    w = scale @ np.linalg.pinv(ik.jacobian(q_contact) @ scale) @ np.concatenate([u, np.zeros(3)])
    if speed * np.max(np.abs(w) / robot.velocity_limit) > SPEED_SHARE:  # too fast for a joint: let the racket turn
        w = least_share_rates(ik.jacobian(q_contact)[:3], u, robot.velocity_limit)
        if speed * np.max(np.abs(w) / robot.velocity_limit) > SPEED_SHARE:
            joint = int(np.argmax(np.abs(w) / robot.velocity_limit))
            raise ValueError(f"the stroke needs {robot.joint_names[joint]} at {speed * abs(w[joint]):.2f} rad/s, "
                             f"over {SPEED_SHARE:.0%} of its limit {robot.velocity_limit[joint]:g}")
    q_back = q_contact - BACKSWING * w
    if np.any(q_back < robot.range_lower) or np.any(q_back > robot.range_upper):
        raise ValueError("the backswing leaves the joint range")

    # segment 1: to the backswing posture, passing below the ball: down, across, up (less far
    # down where the blade would come within FLOOR_CLEARANCE of the floor: a low-mounted arm)
    lowest = min(ik.pose(q_start)[0][2], ik.pose(q_back)[0][2]) - task.blade_radius - FLOOR_CLEARANCE
    low = np.array([0.0, 0.0, min(APPROACH_DROP, lowest)])
    q_start_low, _ = ik.solve(q_start, ik.pose(q_start)[0] - low)
    q_back_low, _ = ik.solve(q_back, ik.pose(q_back)[0] - low)
    moves = []
    for a, b in zip([q_start, q_start_low, q_back_low], [q_start_low, q_back_low, q_back]):
        duration = max(MIN_MOVE_TIME, min_jerk_duration(a, b, robot.goto.max_velocity, robot.goto.max_acceleration))
        moves.append(min_jerk(a, b, duration, dt))
    approach = Desired(*(np.vstack([getattr(m, f) for m in moves]) for f in ("q", "qd", "qdd")))

    # segment 2: minimum-jerk along the line, peak speed at the ball, then pull back and wait
    length = BACKSWING + FOLLOW_THROUGH
    stroke = min_jerk(np.zeros(1), np.full(1, length), 1.875 * length / speed, dt)
    q_stroke = q_back + stroke.q * w
    end, _ = ik.pose(q_stroke[-1])
    base = RobotFrame.of(robot).anchor  # the robot's first joint: the retract pulls toward its axis
    radial = np.array([end[0] - base[0], end[1] - base[1], 0.0]) / np.hypot(end[0] - base[0], end[1] - base[1])
    q_away, _ = ik.solve(q_stroke[-1], end - RETRACT[0] * radial - np.array([0, 0, RETRACT[1]]))
    retract = min_jerk(q_stroke[-1], q_away, RETRACT_TIME, dt)
    q2 = np.vstack([q_stroke, retract.q])
    qd2 = np.vstack([stroke.qd * w, retract.qd])
    qdd2 = np.vstack([stroke.qdd * w, retract.qdd])
    return [
        StartCommand(episode_id, 2, context=np.asarray(target, float)),
        TrajectoryCommand(episode_id, 1, 2, approach.q, approach.qd, approach.qdd),
        TrajectoryCommand(episode_id, 2, 2, q2, qd2, qdd2,
                          wait_time=FLIGHT_WAIT + (task.approaches - 1) * swing_period(task, target)),
    ]


def main() -> None:
    from episodic.runtime.runner import Runner

    parser = argparse.ArgumentParser(description="Run the scripted tetherball stroke and log it.")
    parser.add_argument("--out", default=None, help="HDF5 log to write, replaced if it exists (default: none)")
    parser.add_argument("--target", type=float, nargs=3, default=None, metavar=("X", "Y", "Z"),
                        help="target of the ball's centre, m (default: the task's)")
    parser.add_argument("--approaches", type=int, default=1, help="approaches scored (the task's parameter)")
    args = parser.parse_args()
    params = {"approaches": args.approaches}
    with Runner(make_task("tetherball", params), log=args.out, keep_episodes=True, overwrite=True) as runner:
        commands = reference_commands(runner.robot, 1, args.target, params)
        wall = time.perf_counter()
        replies = [runner.send(c) for c in commands]
        wall = time.perf_counter() - wall
        closest = runner.task.approach_distances()
    ep = runner.episodes[-1]
    steps = ep.n_steps
    sim_time = steps * runner.robot.control_dt
    print(f"flags {[r.flag.name for r in replies]}; return {ep.episode_return:.4f}; closest approach "
          f"{', '.join(f'{d:.4f}' for d in closest)} m; success {ep.success}")
    print(f"{steps} steps ({sim_time:.2f} s simulated) in {wall:.3f} s: {steps / wall:,.0f} steps/s, "
          f"{sim_time / wall:.0f}x real time")


if __name__ == "__main__":
    main()
