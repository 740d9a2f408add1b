"""The scripted reference of reach: inverse kinematics of the end effector to the default target
(episodic.task.kinematics.SiteIK), a 1 s minimum-jerk move (longer on an arm whose joints would
pass 90 % of their velocity limit) and 0.2 s held, the task's horizon (examples/reach_learner.py does
the same with its own durations). On any robot: the default target is placed in its frame.

    python examples/reach_reference.py [--log runs/reach_reference.h5]
"""
from __future__ import annotations

import argparse
import math

import numpy as np

from episodic.interface.commands import StartCommand, TrajectoryCommand
from episodic.interface.robot import Robot, load_robot
from episodic.interface.trajectory import min_jerk
from episodic.runtime.runner import Runner
from episodic.runtime.scene import build_scene
from episodic.task.kinematics import SiteIK
from episodic.tasks import make_task

MOVE, HOLD = 1.0, 0.2  # s: the move to the target, then held (together the task's horizon)
PEAK_SPEED = 15 / 8  # a minimum-jerk move's peak speed over its mean speed (Flash and Hogan 1985)
SPEED_SHARE = 0.9  # of a joint's velocity limit the move may plan: a tenth spare for the tracking's overshoot


def move_time(robot: Robot, start: np.ndarray, goal: np.ndarray) -> float:
    """MOVE s, or the whole control steps a minimum-jerk move from ``start`` to ``goal`` (n_dofs,)
    rad needs to keep every joint under SPEED_SHARE of its velocity limit, if longer."""
    needed = float(np.max(PEAK_SPEED * np.abs(goal - start) / (SPEED_SHARE * robot.velocity_limit)))
    return max(MOVE, math.ceil(needed / robot.control_dt) * robot.control_dt)


def reference_commands(robot: Robot | str = "wam", episode_id: int = 1) -> list:
    """One episode on ``robot``: a start, then the move to the default target held HOLD s."""
    robot = load_robot(robot) if isinstance(robot, str) else robot
    task = make_task("reach")
    scene = build_scene(robot, task)
    ik = SiteIK(scene.model, robot.end_effector_site, scene.qpos_adr, scene.dof_adr, robot.range_lower,
                robot.range_upper)
    home = task.start_posture(robot)
    goal, _ = ik.solve(home, task.default_context())
    move = min_jerk(home, goal, move_time(robot, home, goal), robot.control_dt)
    return [StartCommand(episode_id, 1),
            TrajectoryCommand(episode_id, 1, 1, move.q, move.qd, move.qdd, wait_time=HOLD)]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Run reach's scripted reference once.")
    parser.add_argument("--log", default=None, help="HDF5 log of the run (default: none)")
    args = parser.parse_args(argv)
    with Runner(make_task("reach"), log=args.log, overwrite=True) as runner:
        replies = [runner.send(c) for c in reference_commands(runner.robot)]
    print(f"return {replies[-1].episode_return:.6g}, {'success' if replies[-1].success else 'no success'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
