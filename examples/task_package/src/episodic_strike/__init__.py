"""strike: be at a target with the end effector at a given time.

Context (command 0): the target (x, y, z) m in the world frame, or nothing for (``target_x``,
``target_y``, ``target_z``). At ``strike_time`` s after the motion starts (a motion event, so at
the same control step in every run and replay), the end effector's distance from the target is
recorded: the step of the strike earns ``1 - min(d, reward_radius) / reward_radius`` (between 0
and 1), every other step nothing. The reward is earned, so an episode that ends before the strike
forfeits it and no charge is needed (``worst_reward_rate`` stays 0). Success: the episode struck,
within ``tolerance`` m of the target.

How the strike is kept in the simulation's state (what the log records and a replay repeats): a
body of the scene that touches nothing carries two frictionless slide joints along world x and y,
so gravity never moves them. At the strike, ``on_motion_event`` sets the first to 1 + d (0 before:
never struck) and starts the second moving at 1 m/s from 0, a clock of the time since the strike.
The strike step is then the one step whose clock is at 0 and moving, read from that step alone,
and the final state holds the distance for ``success``.

Task gains (a gains command's ``task_gains``, one value): the gain rad/m^2 of a feedback law that
pulls the tip toward the target through the transposed Jacobian of its position. The law is
written in C (strike.c), built into _strike_law.so when the package is installed, and runs in
episodic's compiled loop like a built-in task's law (episodic.native.CompiledLaw with its path).
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

import mujoco
import numpy as np

from episodic.interface.robot import Robot
from episodic.native import CompiledLaw
from episodic.task import (
    Camera,
    Episode,
    Reference,
    StepView,
    Task,
    TaskError,
    add_target,
    coordinate,
    param,
    place_target,
)

RECORD = "strike_record"  # the body carrying the record of the strike
DISTANCE, CLOCK = "strike_distance", "strike_clock"  # its slide joints (m: 1 + d after the strike; s)
TIP = "strike_tip"  # a site at the end effector, the point that strikes
LAW = Path(__file__).with_name("_strike_law.so")  # the feedback law in C, built on install (setup.py)


@dataclass
class StrikeEpisode(Episode):
    target: np.ndarray | None = None  # (3,) m, world frame


@dataclass
class Strike(Task[StrikeEpisode]):
    name: ClassVar[str] = "strike"
    summary: ClassVar[str] = "be at a target with the end effector at a given time."
    camera: ClassVar[Camera] = {"azimuth": 150, "elevation": -20}  # deg
    columns: ClassVar[tuple[str, ...]] = ("target_x", "target_y", "target_z", "distance", "struck",
                                          "strike_distance", "since_strike")
    context_sizes: ClassVar[tuple[int, ...]] = (0, 3)
    context_help: ClassVar[str] = "a target (x, y, z) m, or no context for the default"
    episode_type: ClassVar[type[Episode]] = StrikeEpisode
    gains_help: ClassVar[str] = ("one value: the gain rad/m^2 of a law pulling the tip toward the target "
                                 "through the transposed Jacobian of its position (in C)")
    reference: ClassVar[Reference | None] = Reference(
        "episodic_strike.reference:reference_commands",
        return_tolerance=0.01,  # the strike step's reward; 4 x the substeps moved it by 1.5e-4
    )

    strike_time: float = param(1.0, "s", "the strike: time after the motion starts", gt=0)
    reward_radius: float = param(0.5, "m", "a strike this far from the target or farther earns nothing", gt=0)
    tolerance: float = param(0.03, "m", "success: the strike is closer than this to the target", gt=0)
    target_x: float = coordinate(0.3, "x", "the target without a context")
    target_y: float = coordinate(0.45, "y", "the target without a context")
    target_z: float = coordinate(1.4, "z", "the target without a context")

    # -- scene ---------------------------------------------------------------
    def add_tool(self, spec: mujoco.MjSpec, robot: Robot) -> None:
        flange = spec.site(robot.end_effector_site)
        flange.parent.add_site(name=TIP, pos=flange.pos, quat=flange.quat)

    def add_scene(self, spec: mujoco.MjSpec, robot: Robot) -> None:
        add_target(spec, self.default_context(), 0.03, [0.9, 0.6, 0.1, 0.5])
        record = spec.worldbody.add_body(name=RECORD)
        record.explicitinertial = True
        record.mass, record.inertia = 1.0, [1.0, 1.0, 1.0]  # kg, kg m^2: any; nothing pushes it
        for joint, axis in ((DISTANCE, [1.0, 0.0, 0.0]), (CLOCK, [0.0, 1.0, 0.0])):
            record.add_joint(name=joint, type=mujoco.mjtJoint.mjJNT_SLIDE, axis=axis)

    # -- episode -------------------------------------------------------------
    def default_context(self) -> np.ndarray:
        """The default target (x, y, z) m."""
        return np.array([self.target_x, self.target_y, self.target_z])

    def initialize_episode(self, model, data, context, rng) -> None:
        place_target(data, self.episode.ids, context)
        self.episode.target = context.copy()
        ids = self.episode.ids
        data.qpos[[ids.qpos[DISTANCE], ids.qpos[CLOCK]]] = 0.0  # not struck (a realtime run carries them over)
        data.qvel[[ids.dof[DISTANCE], ids.dof[CLOCK]]] = 0.0

    def motion_events(self) -> dict[str, float]:
        return {"strike": self.strike_time}

    def on_motion_event(self, name: str, model: mujoco.MjModel, data: mujoco.MjData) -> None:
        ids = self.episode.ids
        mujoco.mj_kinematics(model, data)  # the tip where the state is now (mj_step leaves the previous one)
        d = float(np.linalg.norm(data.site_xpos[ids.site[TIP]] - self.episode.target))
        data.qpos[ids.qpos[DISTANCE]] = 1.0 + d
        data.qpos[ids.qpos[CLOCK]], data.qvel[ids.dof[CLOCK]] = 0.0, 1.0

    # -- feedback law ------------------------------------------------------------
    def check_gains(self, task_gains: np.ndarray) -> None:
        if task_gains.size != 1 or not np.isfinite(task_gains[0]) or task_gains[0] < 0:
            raise TaskError(f"strike takes one task gain >= 0 rad/m^2, got {task_gains.tolist()}")

    def compiled_law(self, model: mujoco.MjModel, task_gains: np.ndarray) -> CompiledLaw:
        if not LAW.is_file():
            raise TaskError(f"strike's feedback law ({LAW.name}) is built when episodic-strike is installed with a "
                            f"C compiler; install it (pip install ./examples/task_package) to use task gains")
        ids = self.episode.ids
        return CompiledLaw(model, "strike", len(ids.arm_dof), {"site": ids.site[TIP], "gain": task_gains[0],
                           "target": self.episode.target, "dof": ids.arm_dof}, path=LAW)

    # -- per step ------------------------------------------------------------
    def state(self, steps: StepView) -> np.ndarray:
        n = len(steps.qpos)
        if self._episode is None or self.episode.target is None:  # the move to the start before the first reset
            return np.zeros((n, len(self.columns)))
        ids, target = self.episode.ids, np.broadcast_to(self.episode.target, (n, 3))
        recorded = steps.qpos[:, ids.qpos[DISTANCE]]
        struck = recorded >= 1.0
        return np.column_stack([target, np.linalg.norm(steps.ee_pos - target, axis=1), struck,
                                np.where(struck, recorded - 1.0, 0.0), steps.qpos[:, ids.qpos[CLOCK]]])

    def step_reward(self, steps: StepView, state: np.ndarray) -> np.ndarray:
        ids = self.episode.ids
        strike = (steps.qvel[:, ids.dof[CLOCK]] == 1.0) & (steps.qpos[:, ids.qpos[CLOCK]] == 0.0)
        closeness = 1.0 - np.minimum(state[:, 5], self.reward_radius) / self.reward_radius
        return np.where(strike, closeness, 0.0)

    def success(self, state: np.ndarray) -> bool:
        return bool(state[4] and state[5] < self.tolerance)
