"""The per-step log columns: one table that the episode machine fills, the HDF5 log stores,
the bridge's log block lays out and every client reads (by the names in the channel header)."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class StepColumn:
    """One per-step column: its HDF5 dtype, its width per step (a number, "dofs" for one value
    per joint or "state" for one per task state column), unit and meaning."""

    name: str
    dtype: type
    width: int | str
    unit: str
    meaning: str


STEP_COLUMNS: tuple[StepColumn, ...] = (
    StepColumn("time", np.float64, 1, "s", "simulation time at the start of the step"),
    StepColumn("machine_state", np.int8, 1, "", "episode machine state (MachineState)"),
    StepColumn("index", np.int32, 1, "", "index of the command the step belongs to (0: the move to the start)"),
    StepColumn("step", np.int32, 1, "", "steps since that command began"),
    StepColumn("q", np.float64, "dofs", "rad", "measured joint positions"),
    StepColumn("qd", np.float64, "dofs", "rad/s", "measured joint velocities"),
    StepColumn("qdd", np.float64, "dofs", "rad/s^2", "joint accelerations over the step"),
    StepColumn("q_d", np.float64, "dofs", "rad", "desired positions (clamped, task feedback included)"),
    StepColumn("qd_d", np.float64, "dofs", "rad/s", "desired velocities"),
    StepColumn("qdd_d", np.float64, "dofs", "rad/s^2", "desired accelerations"),
    StepColumn("u", np.float64, "dofs", "N m", "applied joint torques after saturation"),
    StepColumn("u_ff", np.float64, "dofs", "N m", "feedforward torques"),
    StepColumn("ee_pos", np.float64, 3, "m", "end-effector position, world frame"),
    StepColumn("ee_quat", np.float64, 4, "", "end-effector orientation (w, x, y, z), world frame"),
    StepColumn("task_state", np.float64, "state", "", "the task's state columns"),
    StepColumn("reward", np.float64, 1, "", "the task's reward of the step"),
)
STEP_DTYPES: dict[str, type] = {c.name: c.dtype for c in STEP_COLUMNS}


def step_widths(n_dofs: int, n_state: int) -> tuple[tuple[str, int], ...]:
    """(name, values per step) of every column, in table order."""
    named = {"dofs": n_dofs, "state": n_state}
    return tuple((c.name, c.width if isinstance(c.width, int) else named[c.width]) for c in STEP_COLUMNS)
