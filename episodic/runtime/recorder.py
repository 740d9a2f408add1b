"""The step recorder: a run's control steps as the task sees them (``StepView``, task state) and
as the log keeps them (per-step blocks of the episodic.interface.columns, each in its log dtype).

A run's steps are measured once (``StepRecorder.measure``: the view, the task state and the
joint velocities); a segment cut short truncates that measurement (``Measured.truncate``), and
the episode's block is built from it, so nothing is worked out twice.
"""
from __future__ import annotations

from dataclasses import dataclass

import mujoco
import numpy as np

from episodic.interface.columns import STEP_DTYPES
from episodic.interface.vocabulary import MachineState
from episodic.logs.episode import EpisodeBuffer
from episodic.runtime.backend import Backend
from episodic.runtime.scene import Scene
from episodic.runtime.simulation import StepRecord
from episodic.task import StepView, Task


@dataclass(frozen=True)
class Measured:
    """n control steps of a run, measured: ``record`` (StepRecord of n steps), ``view`` (what the
    task reads of them), ``qd`` (n + 1, n_dofs) rad/s the robot's joint velocities before each
    step and after the last, ``task_state`` (n, n_state)."""

    record: StepRecord
    view: StepView
    qd: np.ndarray
    task_state: np.ndarray

    def __len__(self) -> int:
        return len(self.record)

    def truncate(self, n: int) -> Measured:
        """The first n steps (the task state as measured over all of them, cut)."""
        v = self.view
        view = StepView(v.qpos[:n], v.qvel[:n], v.sensordata[:n], v.u[:n], v.ee_pos[:n], v.dt, v.sensors)
        return Measured(self.record.truncate(n), view, self.qd[: n + 1], self.task_state[:n])


class StepRecorder:
    """Measures runs of ``sim`` (the scene's Backend) for ``task`` and appends them to an
    episode's per-step blocks, numbering the steps of each command (the "step" column)."""

    def __init__(self, scene: Scene, sim: Backend, task: Task) -> None:
        self.scene, self.sim, self.task = scene, sim, task
        self.step_in_command = 0  # the "step" column's next value: steps since the current command began
        self._task_state: tuple[int, np.ndarray] = (-1, np.zeros(0))  # (sim.version, state) last worked out

    def view(self, states: np.ndarray, sensordata: np.ndarray) -> StepView:
        """What the task reads of n steps: ``states`` (n, nstate) mjSTATE_FULLPHYSICS before each
        step, ``sensordata`` (n, nsensordata) at those states."""
        s = self.scene
        return StepView(qpos=s.qpos(states), qvel=s.qvel(states), sensordata=sensordata,
                        u=s.applied_torque(sensordata), ee_pos=s.sensor(sensordata, "ee_pos"),
                        dt=s.robot.control_dt, sensors=s.sensors)

    def measure(self, record: StepRecord) -> Measured:
        """``record``'s steps measured: the task's view and state, the joint velocities."""
        view = self.view(record.state[:-1], record.sensordata)
        return Measured(record, view, self.scene.joint_velocities(record.state), self.task.state(view))

    def current_task_state(self) -> np.ndarray:
        """Task state (n_state,) at the simulator's present state (cached until it changes)."""
        if self._task_state[0] == self.sim.version:
            return self._task_state[1].copy()
        m, d = self.sim.model, self.sim.data
        mujoco.mj_forward(m, d)
        s, sensordata = self.scene, d.sensordata[None].copy()
        view = StepView(d.qpos[None].copy(), d.qvel[None].copy(), sensordata, s.applied_torque(sensordata),
                        s.sensor(sensordata, "ee_pos"), s.robot.control_dt, s.sensors)
        self._task_state = (self.sim.version, self.task.state(view)[0])
        return self._task_state[1].copy()

    def append(self, episode: EpisodeBuffer, steps: Measured, state: MachineState, index: int,
               rewards: np.ndarray | None = None) -> None:
        """Append ``steps`` to ``episode`` as one block of log rows: ``state`` the machine's state
        while they ran, ``index`` the command's, ``rewards`` (n,) each step's (None: zeros)."""
        n, first = len(steps), self.step_in_command
        if n == 0:
            return
        s, record, qd = self.scene, steps.record, steps.qd
        episode.blocks.append({
            "time": record.state[:-1, 0],
            "machine_state": np.full(n, state, STEP_DTYPES["machine_state"]),
            "index": np.full(n, index, STEP_DTYPES["index"]),
            "step": np.arange(first, first + n, dtype=STEP_DTYPES["step"]),
            "q": s.joint_positions(record.state[:-1]), "qd": qd[:-1],
            "qdd": np.diff(qd, axis=0) / s.robot.control_dt,
            "q_d": s.robot.clamp(record.desired.q), "qd_d": record.desired.qd,
            "qdd_d": record.desired.qdd,
            "u": steps.view.u, "u_ff": record.u_ff,
            "ee_pos": steps.view.ee_pos, "ee_quat": s.sensor(record.sensordata, "ee_quat"),
            "task_state": steps.task_state,
            "reward": np.zeros(n) if rewards is None else rewards,
        })
        self.step_in_command += n
