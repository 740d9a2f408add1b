"""reach: bring the end effector to a target point.

Context (command 0): the target (x, y, z) m in the world frame, or nothing for
(``target_x``, ``target_y``, ``target_z``): numbers for the WAM, which on another robot are moved
to the same place relative to its base, scaled to its reach (episodic.task.frame). Step
reward: ``-(|p_ee - p_target| + effort * |u|^2) * dt``, so the episode return is minus the
time-integrated distance and effort.
Success: the episode ends within ``tolerance`` m of the target. Every episode is scored over
``horizon`` s of motion: one whose motion ends sooner, however it ends, is charged the rest at the
worst cost rate (the target's distance from the arm's first joint plus the arm's reach, and every
joint at its torque limit), so ending early never pays.
"""
from __future__ import annotations

import weakref
from collections.abc import Mapping
from dataclasses import dataclass
from typing import ClassVar

import mujoco
import numpy as np

from episodic.interface.robot import Robot
from episodic.task import (
    Camera,
    Episode,
    Needs,
    Reference,
    StepView,
    Task,
    TaskError,
    add_target,
    arm_reach,
    coordinate,
    param,
    place_target,
)
from episodic.task.sl import SLMap

# arm_reach of the robot in a scene's model (one robot each), worked out once per model: it makes
# an MjData (1-2 ms), which at every episode's start took a realtime runner past a tick
_ARM_REACH: weakref.WeakKeyDictionary[mujoco.MjModel, tuple[np.ndarray, float]] = weakref.WeakKeyDictionary()


def _arm_reach(model: mujoco.MjModel, robot: Robot) -> tuple[np.ndarray, float]:
    """``arm_reach`` of ``robot``'s arm in ``model`` (its scene): the anchor (3,) m and the bound m."""
    if model not in _ARM_REACH:
        _ARM_REACH[model] = arm_reach(model, robot.joint_names, robot.end_effector_site)
    anchor, radius = _ARM_REACH[model]
    return anchor.copy(), radius


@dataclass
class ReachEpisode(Episode):
    target: np.ndarray | None = None  # (3,) m, world frame


@dataclass
class Reach(Task[ReachEpisode]):
    name: ClassVar[str] = "reach"
    reference: ClassVar[Reference | None] = Reference(  # examples/reach_reference.py
        "examples.reach_reference:reference_commands",
        return_tolerance=0.003,  # the reference's return is -0.478; 4 x the substeps moved it by 2.5e-4
        learner="examples.learning.reach",
    )
    summary: ClassVar[str] = "bring the end effector to a target point."
    needs: ClassVar[Needs] = Needs(dofs=3)  # a point: three joints place it
    camera: ClassVar[Camera] = {"azimuth": 150, "elevation": -20}  # deg; episodic render frames the rest
    columns: ClassVar[tuple[str, ...]] = ("target_x", "target_y", "target_z", "distance")
    column_docs: ClassVar[Mapping[str, tuple[str, str]]] = {"target_x": ("m", "the target's x (world frame)"),
        "target_y": ("m", "the target's y (world frame)"), "target_z": ("m", "the target's z (world frame)"),
        "distance": ("m", "end effector to target")}
    reward_doc: ClassVar[str] = (
        "-(distance + effort |u|^2) dt: minus the distance to the target and the effort, integrated over time")
    context_sizes: ClassVar[tuple[int, ...]] = (0, 3)
    context_help: ClassVar[str] = "a target (x, y, z) m, or no context for the default"
    episode_type: ClassVar[type[Episode]] = ReachEpisode
    sl: ClassVar[SLMap] = SLMap(("target x m", "target y m", "target z m"), (0, 1, 2),  # SL's layout: tetherball's
                                states=(None,) * 6 + ("target_x", "target_y", "target_z"))

    effort: float = param(1e-4, "m/(N m)^2", "weight of the squared joint torques against the distance "
                          "in the step reward", ge=0)
    tolerance: float = param(0.02, "m", "success: the episode ends closer than this to the target", gt=0)
    # the default target, given for the WAM and placed in another robot's frame (Task.from_wam)
    target_x: float = coordinate(0.0, "x", "the target without a context (for the WAM; in the robot's frame)")
    target_y: float = coordinate(0.45, "y", "the target without a context (for the WAM; in the robot's frame)")
    target_z: float = coordinate(1.55, "z", "the target without a context (for the WAM; in the robot's frame)")
    horizon: float = param(1.2, "s", "motion every episode is scored over: one that ends sooner is charged "
                           "the rest at the worst cost rate (the shortest move and hold of the reference)", ge=0)

    def add_scene(self, spec: mujoco.MjSpec, robot: Robot) -> None:
        add_target(spec, self.default_context(), 0.02, [0.9, 0.2, 0.2, 0.5])

    def default_context(self) -> np.ndarray:
        """The default target (x, y, z) m in the world: (target_x, target_y, target_z), given for
        the WAM, placed in the frame of the robot the scene is built for (:meth:`Task.from_wam`)."""
        return self.from_wam(np.array([self.target_x, self.target_y, self.target_z]))

    def initialize_episode(self, model, data, context, rng) -> None:
        if self._robot is not None:  # a target beyond every posture's reach (arm_reach: an upper bound) is refused
            anchor, radius = _arm_reach(model, self._robot)
            away = float(np.linalg.norm(context - anchor))
            if away > radius + self.tolerance:
                raise TaskError(f"the target ({', '.join(f'{v:g}' for v in context)}) m is {away:.2f} m from the "
                                f"arm's first joint, beyond its reach of {radius:.2f} m: no posture reaches it; "
                                f"give a target within {radius:.2f} m of ({', '.join(f'{v:.2f}' for v in anchor)}) m")
        place_target(data, self.episode.ids, context)
        self.episode.target = context.copy()

    def state(self, steps: StepView) -> np.ndarray:
        target = steps.sensor("target_pos")
        distance = np.linalg.norm(steps.ee_pos - target, axis=1)
        return np.column_stack([target, distance])

    def step_reward(self, steps: StepView, state: np.ndarray) -> np.ndarray:
        return -(state[:, 3] + self.effort * np.sum(steps.u**2, axis=1)) * steps.dt

    def success(self, state: np.ndarray) -> bool:
        return bool(state[3] < self.tolerance)

    def scored_duration(self) -> float:
        return self.horizon

    def worst_reward_rate(self, model: mujoco.MjModel, robot: Robot) -> float:
        """-(the farthest the end effector can be from the episode's target + effort times every
        joint at its torque limit squared) /s."""
        target = self.default_context() if self._episode is None or self.episode.target is None \
            else self.episode.target
        anchor, radius = _arm_reach(model, robot)
        return -(float(np.linalg.norm(target - anchor)) + radius + self.effort * float(np.sum(robot.torque_limit**2)))

