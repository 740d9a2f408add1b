"""reach: bring the end effector to a target point.

Context (command 0): the target (x, y, z) m in the world frame, or nothing for
``default_target``. Step reward: ``-(|p_ee - p_target| + effort * |u|^2) * dt``, so the
episode return is minus the time-integrated distance and effort. Success: the episode
ends within ``tolerance`` m of the target.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import mujoco
import numpy as np

from episodic.robot import Robot
from episodic.task import StepView, Task, TaskError


@dataclass
class Reach(Task):
    name: ClassVar[str] = "reach"
    columns: ClassVar[tuple[str, ...]] = ("target_x", "target_y", "target_z", "distance")
    context_help: ClassVar[str] = "a target (x, y, z) m, or no context for the default"

    effort: float = 1e-4
    tolerance: float = 0.02
    target_x: float = 0.0
    target_y: float = 0.45
    target_z: float = 1.55

    def add_scene(self, spec: mujoco.MjSpec, robot: Robot) -> None:
        body = spec.worldbody.add_body(name="target", mocap=True, pos=self.default_target)
        body.add_geom(type=mujoco.mjtGeom.mjGEOM_SPHERE, size=[0.02, 0, 0], rgba=[0.9, 0.2, 0.2, 0.5],
                      contype=0, conaffinity=0)
        spec.add_sensor(name="target_pos", type=mujoco.mjtSensor.mjSENS_FRAMEPOS,
                        objtype=mujoco.mjtObj.mjOBJ_XBODY, objname="target")

    @property
    def default_target(self) -> list[float]:
        return [self.target_x, self.target_y, self.target_z]

    def reset(self, model, data, context, rng) -> None:
        if context.size not in (0, 3):
            raise TaskError(f"reach takes {self.context_help}; got {context.size} values")
        data.mocap_pos[model.body("target").mocapid[0]] = context if context.size else self.default_target

    def state(self, steps: StepView) -> np.ndarray:
        target = steps.sensor("target_pos")
        distance = np.linalg.norm(steps.ee_pos - target, axis=1)
        return np.column_stack([target, distance])

    def step_reward(self, steps: StepView, state: np.ndarray) -> np.ndarray:
        return -(state[:, 3] + self.effort * np.sum(steps.u**2, axis=1)) * steps.dt

    def success(self, state: np.ndarray) -> bool:
        return bool(state[3] < self.tolerance)
