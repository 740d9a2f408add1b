"""A scripted casting move: carry the hanging ball over the cup like a crane, without swinging,
and lower it in.

The ball on its string is a pendulum hanging from the hook (small-angle period T_n: the task's
``pendulum_period``, 1.783 s for the defaults). Moving the hook along a straight line with a
rest-to-rest profile s(t) leaves the ball swinging afterwards unless the profile's acceleration
has no content at the pendulum's frequency. Zero-vibration (ZV) input shaping (Singer &
Seering, "Preshaping command inputs to reduce system vibration", J. Dyn. Sys. Meas. Control
112, 76 (1990)) makes any profile so: the move is split in two halves, the second started
T_n / 2 later, so that the swing the first half excites the second cancels. Here the profile is a
minimum-jerk move of ``MOVE_TIME`` s, shaped: the hook arrives over the cup T_n / 2 later, with
the ball hanging still below it.

1. The hook's anchor moves from its start (above the ball at its start) in a straight line to
   ``CLEARANCE`` m above the cup: horizontally along the shaped profile and down along a
   minimum-jerk profile of the same duration (the vertical motion hardly excites the swing);
   the hook's axis stays vertical. Each control step's posture is found by inverse kinematics
   (episodic.task.kinematics.SiteIK on the hook's anchor: its position and the hook's axis).
2. It lowers the ball into the cup (minimum jerk, ``LOWER_TIME`` s) until the ball would hang
   ``SLACK`` m below the cup's bottom: the ball settles on the bottom, the string slack.
3. It holds until the ball rests in the cup (the task ends the segment then; ``HOLD`` s at most).

The robot's default gains with inverse-dynamics feedforward of the desired motion (a gain set
before the segment): under gravity compensation alone the WAM's shoulder lags by up to 0.05 rad
in this move, the hook up to 4 cm behind its path, and the ball swings on by 4 cm instead of
1 cm. One segment with q, qd and qdd at the control rate. Only what a remote learner could know is
used: the robot and task models (kinematics, the string's length and the pendulum's period from
the task's parameters) and the context (the cup's position).

On another arm the same move runs from the task's start posture there (the hook pointing down over
the start placed in the arm's frame) to the placed cup: the path is in task space and each point's
posture comes from inverse kinematics (up to ``ITERATIONS`` steps: the Puma 560's wrist passes near
its singular straight posture on the way, where the steps converge slowly).

    python examples/casting_reference.py [--out runs/casting_reference.h5] [--cup X Y] [--noise 30]

runs it in-process and prints the time to rest, the return, the success and the simulation speed;
``--noise N`` prints the success rate of N perturbed copies per noise level (``perturbed``: the
aim off the cup by level x cup_radius and each duration off by the fraction level, both normal
standard deviations).
"""
from __future__ import annotations

import argparse
import time

import numpy as np

from episodic.interface.commands import GainsCommand, StartCommand, TrajectoryCommand
from episodic.interface.robot import Robot, load_robot
from episodic.interface.vocabulary import Feedforward
from episodic.runtime.scene import build_scene
from episodic.task.frame import RobotFrame
from episodic.task.kinematics import SiteIK
from episodic.tasks import make_task

MOVE_TIME = 1.0     # s, the minimum-jerk move before shaping (the shaped move lasts MOVE_TIME + T_n / 2)
CLEARANCE = 0.04    # m, the ball's lowest point above the cup's rim at the end of the move
LOWER_TIME = 0.5    # s, lowering the ball into the cup
SLACK = 0.015       # m, the ball would hang this far below the cup's bottom at the end
HOLD = 2.0          # s, the most held at the end while the ball settles
UP = np.array([0.0, 0.0, 1.0])
ITERATIONS = 1000   # the most inverse kinematics steps per point (near a singular posture it converges slowly)
FINE_DAMPING = 1e-3  # the inverse kinematics' damping on arms other than the WAM (each point starts next to the last)


def min_jerk_profile(t: np.ndarray, duration: float) -> np.ndarray:
    """The rest-to-rest minimum-jerk profile 0 -> 1 at times t s (0 before, 1 after)."""
    s = np.clip(t / duration, 0.0, 1.0)
    return 10 * s**3 - 15 * s**4 + 6 * s**5


def zv_shaped(t: np.ndarray, duration: float, period: float) -> np.ndarray:
    """The minimum-jerk profile convolved with the ZV shaper of an undamped oscillator of
    ``period`` s: halves at 0 and period / 2."""
    return 0.5 * (min_jerk_profile(t, duration) + min_jerk_profile(t - period / 2, duration))


def anchor_path(task, start: np.ndarray, cup: np.ndarray, move_time: float = MOVE_TIME,
                lower_time: float = LOWER_TIME, delay: float | None = None, dt: float = 0.002) -> np.ndarray:
    """The anchor's positions (n, 3) m at the control steps after the start: the shaped move
    to above the cup, then the lowering. ``delay``: the shaper's second half's delay s (default
    half the pendulum's period)."""
    delay = task.pendulum_period() / 2 if delay is None else delay
    string = task.string_length
    over = np.array([*cup, task.rim_height + CLEARANCE + task.ball_radius + string])
    down = task.rim_height - task.cup_depth + task.ball_radius + string - SLACK  # the inner bottom is CUP_BOTTOM up
    move = move_time + delay
    t = np.arange(1, int(np.ceil((move + lower_time) / dt)) + 1) * dt
    horizontal = zv_shaped(t, move_time, 2 * delay)[:, None]
    path = start + (over - start) * np.column_stack([horizontal, horizontal, min_jerk_profile(t, move)])
    path[:, 2] += (down - over[2]) * min_jerk_profile(t - move, lower_time)
    return path


def joint_path(ik: SiteIK, q0: np.ndarray, path: np.ndarray, damping: float = 0.02) -> np.ndarray:
    """Postures (n, n_dofs) putting the anchor on ``path`` with the hook's axis vertical, each
    solved from the one before with the inverse kinematics' ``damping`` (ValueError when a point
    is out of reach)."""
    out, q = np.empty((len(path), len(q0))), q0
    for k, point in enumerate(path):
        q, err = ik.solve(q, point, UP, tolerance=1e-11, iterations=ITERATIONS, damping=damping)
        if err > 1e-6:
            raise ValueError(f"the anchor's path leaves the arm's reach at {np.round(point, 3).tolist()} "
                             f"(error {err:.2g})")
        out[k] = q
    return out


def reference_commands(robot: Robot | str = "wam", episode_id: int = 1, cup=None, params: dict | None = None,
                       move_time: float = MOVE_TIME, lower_time: float = LOWER_TIME, delay: float | None = None,
                       aim=None) -> list:
    """The reference episode for the cup at ``cup`` (x, y) m (None: the task's default), as
    episodic.interface.commands objects: StartCommand (context = the cup's position), the robot's gains
    with inverse-dynamics feedforward and one segment.
    ``move_time``, ``lower_time``, ``delay`` and ``aim`` (where the move goes, (x, y) m; default
    the cup) are for perturbed copies."""
    robot = load_robot(robot) if isinstance(robot, str) else robot
    task = make_task("casting", params)
    scene = build_scene(robot, task)
    cup = task.default_cup if cup is None else np.asarray(cup, float)
    aim = cup if aim is None else np.asarray(aim, float)
    ik = SiteIK(scene.model, "hook_anchor", scene.qpos_adr, scene.dof_adr, robot.range_lower, robot.range_upper)
    q0 = task.start_posture(robot)
    start, _ = ik.pose(q0)
    dt = robot.control_dt
    # the WAM's path with SiteIK's damping, as it always was (its commands unchanged); another
    # arm's with FINE_DAMPING: near a straight wrist (the Puma's on the way) the default damping
    # makes each point take up to ITERATIONS steps
    damping = 0.02 if RobotFrame.of(robot).is_reference() else FINE_DAMPING
    q = joint_path(ik, q0, anchor_path(task, start, aim, move_time, lower_time, delay, dt), damping)
    full = np.vstack([q0, q])
    qd = np.gradient(full, dt, axis=0)
    qdd = np.gradient(qd, dt, axis=0)
    return [StartCommand(episode_id, 2, context=cup),
            GainsCommand(episode_id, 1, 2, robot.kp, robot.kd, feedforward=Feedforward.FEEDFORWARD),
            TrajectoryCommand(episode_id, 2, 2, q, qd[1:], qdd[1:], wait_time=HOLD)]


def perturbed(rng: np.random.Generator, level: float, robot: Robot | str = "wam", episode_id: int = 1) -> list:
    """The reference with its aim off the cup by level x cup_radius (normal, each axis) and its
    move time, lowering time and shaper delay each off by the fraction level (normal)."""
    task = make_task("casting")
    aim = task.default_cup + rng.normal(0.0, level * task.cup_radius, 2)
    move, lower, delay = (1.0 + rng.normal(0.0, level, 3)).clip(0.2) * [MOVE_TIME, LOWER_TIME,
                                                                         task.pendulum_period() / 2]
    return reference_commands(robot, episode_id, move_time=move, lower_time=lower, delay=delay, aim=aim)


NOISE_LEVELS = (0.05, 0.1, 0.2, 0.3)


def main() -> None:
    from episodic.runtime.runner import Runner

    parser = argparse.ArgumentParser(description="Run the scripted casting move and log it.")
    parser.add_argument("--out", default=None, help="HDF5 log to write, replaced if it exists (default: none)")
    parser.add_argument("--cup", type=float, nargs=2, default=None, metavar=("X", "Y"),
                        help="the cup's position, m (default: the task's)")
    parser.add_argument("--noise", type=int, default=0, metavar="N",
                        help="also run N perturbed copies per noise level and print the success rates")
    args = parser.parse_args()
    runner = Runner(make_task("casting"), log=args.out, keep_episodes=True, overwrite=True)
    try:
        commands = reference_commands(runner.robot, 1, args.cup)
        began = time.perf_counter()
        flags = [runner.send(c).flag.name for c in commands]
        elapsed = time.perf_counter() - began
        task, (episode,) = runner.task, runner.episodes
    finally:
        runner.close()
    rested = "never" if task.time_to_rest() is None else f"{task.time_to_rest():.3f} s"
    simulated = episode.n_steps * runner.robot.control_dt
    print(f"flags {flags}; at rest in the cup after {rested}, {task.episode.strikes} rim strikes; "
          f"return {episode.episode_return:.4f}; success {episode.success}")
    print(f"{episode.n_steps} steps ({simulated:.2f} s simulated) in {elapsed:.3f} s: "
          f"{episode.n_steps / elapsed:,.0f} steps/s, {simulated / elapsed:.1f}x real time")
    if args.noise:
        from episodic.learning.noise import noise_table, print_noise_table

        rows = noise_table("casting", perturbed, NOISE_LEVELS, n=args.noise)
        print_noise_table(rows, "fraction")


if __name__ == "__main__":
    main()
