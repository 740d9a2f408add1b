"""How fast an arm's joints must be to move ball_in_cup's cup along the WAM's catching swing.

    python benchmarks/ball_in_cup_arms.py [--robots panda ur5 puma560] [--shifts -0.15 0 0.15] [--turns 0 90 270]
                                          [--step 0.01]

The reference swing (episodic.tasks.ball_in_cup_swing.REFERENCE_SWING) is in the WAM's joint angles;
on another arm it is the cup's path as the WAM moves it (the rim's centre and the cup's axis at
every 2 ms control step), its start placed in the arm's frame and the path turned with the arm's
facing, unscaled (episodic.tasks.ball_in_cup.arm_swing_trajectory: inverse kinematics at every step). The
path cannot be slowed or shrunk: the ball's flight over the rim is set by gravity and the 0.4 m
string. For each arm and each placement of the path (its start moved by every combination of
``--shifts`` m along the arm's facing and up, and the path turned by ``--turns`` degrees about
the vertical: by default 0, 90 and 270, not 180, which swings the ball back at the robot; not
where the ball hanging at the start would be in the floor) this
prints the largest joint speed over its limit the path needs, followed every ``--step`` s (inf:
the arm cannot follow it, a joint at the end of its range or the cup out of reach); then, for the
placement needing the least, that at the 2 ms control period, and the same along the postures it
passes through with the joint rates at each step that give the cup's motion (its velocity, and its
axis's turn) with the smallest largest share of the limits (episodic.task.frame.least_share_rates:
no choice of the redundant joints' rates does better at those postures). Above 1 the arm's safety
layer aborts the swing.

The Panda and the UR5 are imported from example-robot-data (the robots extra) into a temporary
robot directory, as tests/test_task_robots.py does; the Puma 560 is built in. Measured on
2026-11-28 (2 shared cores, 4 minutes), the best of 27 placements at the 2 ms control period (and
at the task's own placement): Panda 1.85 (4.65), UR5 1.46 of its 18 placements with the ball
above the floor (1.53), Puma 560 1.21 (inf: at the task's placement its j3 reaches the end of its
range 0.37 s into the swing); with the least-share rates along the best placement, Panda 1.66,
UR5 1.45, Puma 560 1.13. The WAM itself needs 0.69 of its j4's limit.
"""
from __future__ import annotations

import argparse
import importlib.metadata
import itertools
import os
import tempfile
from pathlib import Path

import numpy as np

from episodic.interface.robot import Robot, load_robot
from episodic.task.frame import RobotFrame, least_share_rates, tool_ik
from episodic.tasks.ball_in_cup import (
    ANCHOR_GAP,
    BOTTOM_THICKNESS,
    CUP_AXIS,
    REFERENCE_SWING,
    BallInCup,
    arm_swing_trajectory,
    cup_path,
)
from episodic.tools.robot_import import import_robot

PANDA_READY = [0.0, -0.785398, 0.0, -2.356194, 0.0, 1.570796, 0.785398]  # rad, as tests/test_robot_import.py


def import_arms(folder: Path) -> None:
    """The Panda and the UR5 of example-robot-data imported into ``folder`` (as the tests do)."""
    robots = Path(str(importlib.metadata.distribution("example-robot-data").locate_file(
        "cmeel.prefix/share/example-robot-data/robots")))
    os.environ["EPISODIC_ROBOTS"] = str(folder)
    import_robot(robots / "panda_description" / "urdf" / "panda.urdf", home=PANDA_READY,
                 hold={"panda_finger_joint1": 0.04, "panda_finger_joint2": 0.04}, echo=lambda _: None)
    import_robot(robots / "ur_description" / "urdf" / "ur5_robot.urdf", name="ur5", echo=lambda _: None)


def hanging_ball_height(robot: Robot, offset: np.ndarray) -> float:
    """m, the lowest point of the ball hanging still below the cup at the start of the path placed
    with ``offset`` (3,) m, above the floor (z = 0)."""
    task = BallInCup()
    start = RobotFrame.of(robot).from_wam(cup_path(REFERENCE_SWING, 1.0)[0][0]) + RobotFrame.of(robot).rotation @ offset
    return float(start[2] - task.cup_depth - BOTTOM_THICKNESS - ANCHOR_GAP - task.string_length - task.ball_radius)


def peak_share(robot: Robot, offset: np.ndarray | None, turn: float, dt: float | None = None
               ) -> tuple[float, np.ndarray | None]:
    """The largest joint speed over its limit along the placed path followed every ``dt`` s (the
    control period if None; inf if the arm cannot follow it), and the path's postures (n, n_dofs) rad."""
    try:
        q, qd, _ = arm_swing_trajectory(robot, REFERENCE_SWING, offset, turn, dt)
    except ValueError:
        return np.inf, None
    return float(np.max(np.abs(qd) / robot.velocity_limit)), q


def least_share_along(robot: Robot, postures: np.ndarray, turn: float) -> float:
    """The largest, over the path's steps, of the smallest largest share of the velocity limits
    that gives the cup its motion at the step's posture (least_share_rates on the rim's velocity and
    the two components of the cup's turn across its axis)."""
    dt, frame = robot.control_dt, RobotFrame.of(robot)
    rims, axes = cup_path(REFERENCE_SWING, dt)
    c, s = np.cos(turn), np.sin(turn)
    rotation = np.array([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]]) @ frame.rotation \
        @ RobotFrame.of(load_robot("wam")).rotation.T
    velocity = np.gradient(rims, dt, axis=0) @ rotation.T
    axes = axes @ rotation.T
    spin = np.cross(axes, np.gradient(axes, dt, axis=0))  # the axis's turn, rad/s (across the axis)
    ik = tool_ik(robot, BallInCup().add_tool, "cup_rim")
    worst = 0.0
    for q, v, w in zip(postures, velocity[1:], spin[1:]):
        jacobian = ik.jacobian(q)
        axis = ik.pose(q, CUP_AXIS)[1]
        across = np.linalg.svd(np.eye(3) - np.outer(axis, axis))[0][:, :2]  # two directions normal to the axis
        rates = least_share_rates(np.vstack([jacobian[:3], across.T @ jacobian[3:]]),
                                  np.concatenate([v, across.T @ w]), robot.velocity_limit)
        worst = max(worst, float(np.max(np.abs(rates) / robot.velocity_limit)))
    return worst


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--robots", nargs="+", default=["panda", "ur5", "puma560"])
    parser.add_argument("--shifts", nargs="+", type=float, default=[-0.15, 0.0, 0.15], help="m")
    parser.add_argument("--turns", nargs="+", type=float, default=[0.0, 90.0, 270.0], help="deg")
    parser.add_argument("--step", type=float, default=0.01, help="s between the path's points in the search "
                        "(the best placement is measured again at the control period)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        import_arms(Path(folder))
        for name in args.robots:
            robot = load_robot(name)
            own, _ = peak_share(robot, None, 0.0)
            best = (np.inf, np.zeros(3), 0.0, None)
            for dx, dz, turn in itertools.product(args.shifts, args.shifts, np.radians(args.turns)):
                if hanging_ball_height(robot, np.array([dx, 0.0, dz])) < 0:
                    print(f"{name:8} shift ({dx:+.2f}, {dz:+.2f}) m: the hanging ball would start in the floor")
                    continue
                share, _ = peak_share(robot, np.array([dx, 0.0, dz]), float(turn), args.step)
                print(f"{name:8} shift ({dx:+.2f}, {dz:+.2f}) m, turned {np.degrees(turn):3.0f} deg: {share:.2f}",
                      flush=True)
                if share < best[0]:
                    best = (share, np.array([dx, 0.0, dz]), float(turn), None)
            _, offset, turn, _ = best
            share, postures = peak_share(robot, offset, turn)  # at the control period
            least = least_share_along(robot, postures, turn) if postures is not None else np.inf
            print(f"{name}: the task's placement {own:.2f}; best of the placements {share:.2f} (shift "
                  f"{offset[0]:+.2f}, {offset[2]:+.2f} m, turned {np.degrees(turn):.0f} deg), with the least-share "
                  f"rates along it {least:.2f}", flush=True)


if __name__ == "__main__":
    main()
