"""The scripted reference of reach: inverse kinematics of the end effector to the default target
(episodic.task.kinematics.SiteIK), a 1 s minimum-jerk move and 0.2 s held, the task's horizon
(examples/reach_learner.py does the same with its own durations).

    python examples/reach_reference.py [--log runs/reach_reference.h5]
"""
from __future__ import annotations

import argparse

from episodic.interface.commands import StartCommand, TrajectoryCommand
from episodic.interface.robot import Robot, load_robot
from episodic.interface.trajectory import min_jerk
from episodic.runtime.runner import Runner
from episodic.runtime.scene import build_scene
from episodic.task.kinematics import SiteIK
from episodic.tasks import make_task

MOVE, HOLD = 1.0, 0.2  # s: the move to the target, then held (together the task's horizon)


def reference_commands(robot: Robot | str = "wam", episode_id: int = 1) -> list:
    """One episode on ``robot``: a start, then the move to the default target held HOLD s."""
    robot = load_robot(robot) if isinstance(robot, str) else robot
    task = make_task("reach")
    scene = build_scene(robot, task)
    ik = SiteIK(scene.model, robot.end_effector_site, scene.qpos_adr, scene.dof_adr, robot.range_lower,
                robot.range_upper)
    home = task.start_posture(robot)
    goal, _ = ik.solve(home, task.default_context())
    move = min_jerk(home, goal, MOVE, robot.control_dt)
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
