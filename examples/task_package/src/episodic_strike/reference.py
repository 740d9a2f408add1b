"""The scripted reference of strike: inverse kinematics of the end effector to the target
(episodic.task.kinematics.SiteIK), a minimum-jerk move from the start posture that ends there at
the strike time, then held 0.3 s past it."""
from __future__ import annotations

from episodic.interface.commands import StartCommand, TrajectoryCommand
from episodic.interface.robot import Robot
from episodic.interface.trajectory import min_jerk
from episodic.runtime.scene import build_scene
from episodic.task.kinematics import SiteIK
from episodic_strike import Strike

HOLD = 0.3  # s held after the strike


def reference_commands(robot: Robot, episode_id: int = 1, task: Strike | None = None) -> list:
    """One episode of ``task`` (default parameters when None) on ``robot``: a start, then the
    move arriving at the target at the strike time and held HOLD s."""
    task = Strike() if task is None else task
    scene = build_scene(robot, task)
    ik = SiteIK(scene.model, robot.end_effector_site, scene.qpos_adr, scene.dof_adr, robot.range_lower,
                robot.range_upper)
    start = task.start_posture(robot)
    goal, _ = ik.solve(start, task.default_context())
    move = min_jerk(start, goal, task.strike_time, robot.control_dt)
    return [StartCommand(episode_id, 1),
            TrajectoryCommand(episode_id, 1, 1, move.q, move.qd, move.qdd, wait_time=HOLD)]
