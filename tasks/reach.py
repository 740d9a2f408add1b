"""reach: bring the end effector to a target point.

Context (command 0): the target (x, y, z) m in the world frame, or nothing for
(``target_x``, ``target_y``, ``target_z``). Step reward: ``-(|p_ee - p_target| + effort *
|u|^2) * dt``, so the episode return is minus the time-integrated distance and effort.
Success: the episode ends within ``tolerance`` m of the target.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import mujoco
import numpy as np

from episodic.robot import Robot
from episodic.task import StepView, Task, add_target, coordinate, param, place_target


@dataclass
class Reach(Task):
    name: ClassVar[str] = "reach"
    summary: ClassVar[str] = "bring the end effector to a target point."
    camera: ClassVar[dict[str, float]] = {"azimuth": 150, "elevation": -20}  # deg; episodic render frames the rest
    columns: ClassVar[tuple[str, ...]] = ("target_x", "target_y", "target_z", "distance")
    context_sizes: ClassVar[tuple[int, ...]] = (0, 3)
    context_help: ClassVar[str] = "a target (x, y, z) m, or no context for the default"

    effort: float = param(1e-4, "m/(N m)^2", "weight of the squared joint torques against the distance "
                          "in the step reward", ge=0)
    tolerance: float = param(0.02, "m", "success: the episode ends closer than this to the target", gt=0)
    target_x: float = coordinate(0.0, "x", "the target without a context")
    target_y: float = coordinate(0.45, "y", "the target without a context")
    target_z: float = coordinate(1.55, "z", "the target without a context")

    def add_scene(self, spec: mujoco.MjSpec, robot: Robot) -> None:
        add_target(spec, self.default_context(), 0.02, [0.9, 0.2, 0.2, 0.5])

    def default_context(self) -> np.ndarray:
        """The default target (x, y, z) m."""
        return np.array([self.target_x, self.target_y, self.target_z])

    def initialize_episode(self, model, data, context, rng) -> None:
        place_target(data, self.episode.ids, context)

    def state(self, steps: StepView) -> np.ndarray:
        target = steps.sensor("target_pos")
        distance = np.linalg.norm(steps.ee_pos - target, axis=1)
        return np.column_stack([target, distance])

    def step_reward(self, steps: StepView, state: np.ndarray) -> np.ndarray:
        return -(state[:, 3] + self.effort * np.sum(steps.u**2, axis=1)) * steps.dt

    def success(self, state: np.ndarray) -> bool:
        return bool(state[3] < self.tolerance)
