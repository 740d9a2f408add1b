"""The ball-in-a-cup swing: a hand-shaped policy of three pitch joints, and its episodes.

A swing is a cubic spline through via-points ("knots") of the three pitch joints j2, j4 and j6
(the arm moves in its vertical plane), at rest at the start posture at t = 0 and at the last
knot (the catch posture); the other joints hold the start posture. It is sent as a start
command and three trajectory segments at the control rate (q, qd, qdd): swing back, up and
over, and the catch, whose final posture is held so the ball can settle. ``REFERENCE_SWING``
catches (``examples/ball_in_cup_reference.py``); ``bent_swing`` bends it into a miss, the
teacher's path of the kinesthetic demonstration (``episodic.learning.demonstration``); the examples
``ball_in_cup_learner.py`` and ``cma_ball_in_cup.py`` build on it. On an arm other than the WAM
a swing is the cup's path as the WAM would move it, followed by inverse kinematics in the arm's
frame (``episodic.tasks.ball_in_cup.arm_swing_trajectory``), so the same knots parametrize it on any arm.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from episodic.interface.commands import Command, StartCommand, TrajectoryCommand
from episodic.interface.robot import Robot
from episodic.interface.vocabulary import Flag
from episodic.task.frame import RobotFrame
from episodic.tasks.ball_in_cup import (
    REFERENCE_SWING,
    SWING_JOINTS,
    BallInCup,
    Swing,
    arm_swing_trajectory,
    swing_trajectory,
)

# -- ball in a cup: the swing ----------------------------------------------------------------
SEGMENT_KNOTS = (2, 4)    # the segments change at these knots: back | up and over | catch
CATCH_WAIT = 1.0          # s the catch posture is held after the last knot (the ball settles)
DEMO_NOISE = 0.03         # rad, standard deviation of the perturbations of the demo's variants
DEMO_TASK = "ball_in_cup"


ELBOW = 3  # j4, the joint whose knots a learner's missing start swing bends (index into the 7 joints)


def swing_params(swing: Swing) -> np.ndarray:
    """theta (16,): the knots (5, 3) rad row by row, then the step s (a learner's parameter vector)."""
    return np.append(np.asarray(swing.knots, float).ravel(), swing.step)


def params_swing(theta: np.ndarray) -> Swing:
    """The Swing of parameter vector ``theta`` (16,) (see ``swing_params``)."""
    theta = np.asarray(theta, float)
    return Swing(step=float(theta[-1]), knots=theta[:-1].reshape(REFERENCE_SWING.knots.shape).copy())


def bent_swing(offset: float, joint: int = ELBOW) -> Swing:
    """``REFERENCE_SWING`` with every knot of ``joint`` (one of SWING_JOINTS) ``offset`` rad further:
    a swing that misses, for a learner to start from."""
    knots = REFERENCE_SWING.knots.copy()
    knots[:, SWING_JOINTS.index(joint)] += offset
    return Swing(REFERENCE_SWING.step, knots)


def start_posture(robot) -> np.ndarray:
    """The ball_in_cup task's start posture (n_dofs,) rad on ``robot``."""
    return BallInCup().start_posture(robot)


def swing_commands(robot: Robot, swing: Swing, episode_id: int = 1, wait: float = CATCH_WAIT) -> list[Command]:
    """The commands of one episode: start (the task's start posture, no context) and three
    trajectory segments of ``swing`` (on an arm other than the WAM the cup's path of the WAM's
    swing, ``arm_swing_trajectory``), the last holding the catch posture ``wait`` s."""
    start = start_posture(robot)
    if RobotFrame.of(robot).is_reference():
        q, qd, qdd = swing_trajectory(start, swing, robot.control_dt)
    else:
        q, qd, qdd = arm_swing_trajectory(robot, swing)
    cuts = [int(round(k * swing.step / robot.control_dt)) for k in SEGMENT_KNOTS]
    pieces = np.split(np.arange(len(q)), cuts)
    n = len(pieces)
    commands: list[Command] = [StartCommand(episode_id, n, posture=start)]
    for k, rows in enumerate(pieces, start=1):
        commands.append(TrajectoryCommand(episode_id, k, n, q[rows], qd[rows], qdd[rows],
                                          wait_time=wait if k == n else 0.0))
    return commands


def reference_commands(robot: Robot, episode_id: int = 1) -> list[Command]:
    """The reference swing's commands (see ``swing_commands``)."""
    return swing_commands(robot, REFERENCE_SWING, episode_id)


def perturbed_swing(swing: Swing, rng: np.random.Generator, noise: float = DEMO_NOISE) -> Swing:
    """``swing`` with Gaussian noise of ``noise`` rad on every knot."""
    return Swing(swing.step, swing.knots + rng.normal(0.0, noise, swing.knots.shape))


def demo_swings(n: int, seed: int = 0, noise: float = DEMO_NOISE) -> list[tuple[str, Swing]]:
    """The reference swing and n - 1 perturbed copies, each with a label."""
    rng = np.random.default_rng(seed)
    out = [("reference", REFERENCE_SWING)]
    out += [(f"perturbed {k}", perturbed_swing(REFERENCE_SWING, rng, noise)) for k in range(1, n)]
    return out


@dataclass
class SwingRow:
    """Outcome of one swing episode: ``number`` its place in the run (0 first: the episode number
    of `episodic info` and `episodic replay --episode`), ``episode_id`` the learner's id, and
    ``steps`` every control step of the episode, the move to the start included (what `episodic
    info` counts)."""

    number: int
    episode_id: int
    label: str
    episode_return: float
    caught: bool
    steps: int
    flag: str
    message: str = ""


def run_swing(send: Callable, commands: list, label: str = "", caught_column: int | None = None,
              number: int = 0) -> SwingRow:
    """Send one episode's ``commands`` through ``send`` (a Runner's or a Client's ``send``) and
    summarise the replies; ``number``: the episode's place in the run."""
    column = BallInCup.columns.index("caught") if caught_column is None else caught_column
    replies = []
    for command in commands:
        reply = send(command)
        replies.append(reply)
        if reply.flag != Flag.OK or reply.episode_done:
            break
    last = replies[-1]
    caught = bool(last.flag == Flag.OK and last.episode_done and last.state[column] > 0.5)
    return SwingRow(number=number, episode_id=commands[0].episode_id, label=label,
                    episode_return=float(sum(r.reward for r in replies)), caught=caught,
                    steps=int(sum(r.n_steps for r in replies)), flag=last.flag.name,
                    message=last.message)


def run_swings(send: Callable, robot, swings: list[tuple[str, Swing]], first_id: int = 1,
               progress: Callable[[int, int], None] | None = None) -> list[SwingRow]:
    """One episode per (label, swing), numbered from 0 (a fresh runner's run); one SwingRow each.
    ``progress(done, total)`` is called after each episode."""
    rows = []
    for i, (label, swing) in enumerate(swings):
        rows.append(run_swing(send, swing_commands(robot, swing, first_id + i), label, number=i))
        if progress is not None:
            progress(i + 1, len(swings))
    return rows


def format_swing_rows(rows: list[SwingRow]) -> str:
    """A plain-text table of swing episodes, with a summary line."""
    head = f"{'episode':>7} {'id':>4}  {'swing':<12} {'return':>8} {'caught':>6} {'steps':>6}  flag"
    lines = [head, "-" * len(head)]
    for r in rows:
        lines.append(f"{r.number:>7} {r.episode_id:>4}  {r.label:<12} {r.episode_return:>8.3f} "
                     f"{'yes' if r.caught else 'no':>6} {r.steps:>6}  {r.flag}")
    lines.append(f"{sum(r.caught for r in rows)} of {len(rows)} swings caught the ball")
    return "\n".join(lines)
