"""What a task is: its scene on the robot, how command 0's context resets it, its
rewards, when a segment is over, and the named state columns it logs."""
from __future__ import annotations

from dataclasses import dataclass, fields
from typing import ClassVar

import mujoco
import numpy as np

from episodic.robot import Robot


class TaskError(ValueError):
    """A task parameter or context is invalid; the message says what to change."""


@dataclass
class StepView:
    """What a task reads of n control steps.

    qpos (n, nq), qvel (n, nv): full simulator state before each step; sensordata
    (n, nsensordata); u (n, n_dofs) N m applied joint torques; ee_pos (n, 3) m; dt s;
    sensor(name) -> that sensor's columns.
    """

    qpos: np.ndarray
    qvel: np.ndarray
    sensordata: np.ndarray
    u: np.ndarray
    ee_pos: np.ndarray
    dt: float
    sensors: dict[str, slice]

    def sensor(self, name: str) -> np.ndarray:
        return self.sensordata[:, self.sensors[name]]


@dataclass
class Task:
    """Base class. Subclasses are dataclasses whose fields are the difficulty parameters
    (settable by name, recorded in every log) and override the hooks below."""

    name: ClassVar[str] = ""
    columns: ClassVar[tuple[str, ...]] = ()
    context_help: ClassVar[str] = "no context"
    gains_help: ClassVar[str] = ""  # what task_gains of a gains command mean; "" = no feedback law
    substeps: ClassVar[int] = 1  # physics steps per control step the task needs (at least the robot's)

    @classmethod
    def with_params(cls, params: dict[str, str | float]) -> "Task":
        """Build from name=value strings (the CLI's --param), checking names and types."""
        known = {f.name: f for f in fields(cls)}
        values = {}
        for key, raw in params.items():
            if key not in known:
                raise TaskError(f"task '{cls.name}' has no parameter '{key}'; known: {', '.join(known) or 'none'}")
            default = getattr(cls, key, None)
            try:
                values[key] = type(default)(raw) if default is not None else float(raw)
            except (TypeError, ValueError):
                raise TaskError(f"parameter '{key}' of task '{cls.name}' needs a {type(default).__name__}, got {raw!r}") from None
        return cls(**values)

    def params(self) -> dict:
        return {f.name: getattr(self, f.name) for f in fields(self)}

    def require_positive(self, *names: str) -> None:
        """Raise TaskError naming the first of these parameters that is not a finite positive number."""
        for key in names:
            value = getattr(self, key)
            if not (np.isfinite(value) and value > 0):
                raise TaskError(f"parameter '{key}' of task '{self.name}' must be a positive number, got {value}")

    # -- scene ---------------------------------------------------------------
    def add_tool(self, spec: mujoco.MjSpec, robot: Robot) -> None:
        """Add bodies rigidly attached to the end effector (part of the arm's dynamics)."""

    def add_scene(self, spec: mujoco.MjSpec, robot: Robot) -> None:
        """Add the task's objects and sensors to the world."""

    def start_posture(self, robot: Robot) -> np.ndarray:
        """Default start posture (n_dofs,) rad when command 0 gives none."""
        return robot.home.copy()

    def reset(self, model: mujoco.MjModel, data: mujoco.MjData, context: np.ndarray,
              rng: np.random.Generator) -> None:
        """Put the task's objects in their start state for this context; raise TaskError on a bad context."""
        if context.size:
            raise TaskError(f"task '{self.name}' takes {self.context_help}; got {context.size} values")

    def check_gains(self, task_gains: np.ndarray) -> None:
        """Raise TaskError unless ``task_gains`` suit this task's feedback law."""
        if not self.gains_help:
            raise TaskError(f"task '{self.name}' has no feedback law; send a gains command without task gains")

    def feedback(self, model: mujoco.MjModel, data: mujoco.MjData, task_gains: np.ndarray) -> np.ndarray:
        """Offsets (n_dofs,) rad to the desired joint positions at the present state, from the
        task's feedback law with ``task_gains``. Read data.qpos / data.qvel (current); derived
        fields such as xpos are one step old here."""
        raise NotImplementedError(f"task '{self.name}' has no feedback law")

    # -- per step ------------------------------------------------------------
    def state(self, steps: StepView) -> np.ndarray:
        """Extra state (n, len(columns))."""
        return np.zeros((len(steps.qpos), 0))

    def step_reward(self, steps: StepView, state: np.ndarray) -> np.ndarray:
        """Reward of each step (n,)."""
        return np.zeros(len(steps.qpos))

    def segment_end(self, steps: StepView, state: np.ndarray) -> int | None:
        """Number of steps after which the segment is over early, or None to run it whole. In
        realtime mode it is asked after every step with the last 2 s of steps
        (episodic.machine.SEGMENT_END_WINDOW), so decide from those."""
        return None

    def success(self, state: np.ndarray) -> bool:
        """Whether an episode ending in ``state`` (len(columns),) counts as solved."""
        return False
