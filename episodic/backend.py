"""The seam between the runner and a robot driven one control tick at a time.

The runner's episode machine talks to a backend (``Simulation`` is the MuJoCo one; with a
``Pacer`` it runs in wall-clock time). A real robot plugs in through a ``JointDriver``: three
calls per control tick, wrapped by ``DriverBackend`` into what the machine needs.

Per tick k (period 1/control_rate s):
  1. ``read()``: the measured joint state at the start of the tick (q rad, qd rad/s, and the
     torque u N m the joint controller applied during the previous tick);
  2. ``command(JointCommand)``: desired q_d rad and qd_d rad/s, feedforward u_ff N m and the
     gains kp N m/rad, kd N m s/rad, all (n_dofs,); the driver's joint controller applies
     ``u = kp (q_d - q) + kd (qd_d - qd) + u_ff`` saturated at its torque limits, every cycle
     until the next command (the runner has already clamped q_d to the joint range, added
     gravity compensation or inverse dynamics to u_ff as the mode asks, and checks the
     measured velocities);
  3. ``wait_tick()``: block until the next tick starts; return when it started (perf_counter
     s) and whether it was late. On a missed tick the driver keeps applying the last command
     (a robot must never go limp because its host was late) and reports the tick as late;
     the runner counts it in the episode's timing record and carries on from the present.
"""
from __future__ import annotations

import copy
import time
from dataclasses import dataclass
from typing import Protocol

import mujoco
import numpy as np

from episodic.commands import Feedforward
from episodic.pacing import Pacer
from episodic.scene import ROLLOUT_SPEC, Scene
from episodic.simulation import Feedback, Gains, Simulation, StepRecord, Stop
from episodic.trajectory import Desired


@dataclass(frozen=True)
class JointState:
    """Measured state at the start of a tick: time s, q rad, qd rad/s, u N m (n_dofs,) each."""

    time: float
    q: np.ndarray
    qd: np.ndarray
    u: np.ndarray


@dataclass(frozen=True)
class JointCommand:
    """What the joint controller tracks until the next tick (see the module docstring)."""

    q_d: np.ndarray
    qd_d: np.ndarray
    u_ff: np.ndarray
    kp: np.ndarray
    kd: np.ndarray


class JointDriver(Protocol):
    """A robot's joint-level interface (WAM, Franka, ros2_control, ...)."""

    def read(self) -> JointState: ...

    def command(self, command: JointCommand) -> None: ...

    def wait_tick(self) -> tuple[float, bool]: ...


class DriverBackend(Simulation):
    """The episode machine's backend for a JointDriver. The MuJoCo model is a mirror: each tick
    the measured joint state is written into it for the logged end-effector pose and the task's
    sensors (task objects a real robot cannot observe stay where the task put them)."""

    def __init__(self, scene: Scene, driver: JointDriver):
        super().__init__(scene, Pacer(scene.robot.control_dt))
        self.driver = driver
        self._u = np.zeros(scene.robot.n_dofs)
        self._u_columns = [scene.sensors[f"u/{name}"].start for name in scene.robot.joint_names]

    def _observe(self) -> None:
        state = self.driver.read()
        d = self.data
        d.time = state.time
        d.qpos[self.scene.qpos_adr] = state.q
        d.qvel[self.scene.dof_adr] = state.qd
        self._u = state.u
        mujoco.mj_forward(self.model, d)
        self.touch()

    def reset(self, q: np.ndarray) -> None:
        """A real robot cannot be put anywhere: take it where it is (``q`` is ignored)."""
        self._observe()
        self.reset_integral()

    def set_state(self, state: np.ndarray, spec: int = 0) -> None:
        raise RuntimeError("a robot's state cannot be set; replay needs a simulation backend")

    def _feedforward(self, gains: Gains, q, qd, qdd_d, q_d, qd_d) -> np.ndarray:
        """u_ff N m (n_dofs,) of the mode at this tick (gravity compensation comes from the model)."""
        zero = np.zeros_like(q)
        if gains.feedforward == Feedforward.GRAVITY_COMPENSATION:
            return self.inverse_dynamics(q, zero, zero)
        if gains.feedforward == Feedforward.FEEDFORWARD:
            return self.inverse_dynamics(q_d, qd_d, qdd_d)
        if gains.feedforward == Feedforward.INVERSE_DYNAMICS:
            return self.inverse_dynamics(q, qd, qdd_d)
        return zero

    def run(self, desired: Desired, gains: Gains, feedback: Feedback | None = None,
            stop: Stop | None = None) -> StepRecord:
        n = len(desired)
        robot = self.scene.robot
        q_d = robot.clamp(desired.q)
        states = np.empty((n + 1, self.nstate))
        sensordata = np.empty((n, self.model.nsensordata))
        u_ff = np.empty((n, robot.n_dofs))
        self._observe()
        mujoco.mj_getState(self.model, self.data, states[0], ROLLOUT_SPEC)
        for k in range(n):
            q, qd = self.q, self.qd
            if feedback is not None:
                q_d[k] = robot.clamp(q_d[k] + feedback(self.data))
            u_ff[k] = self._feedforward(gains, q, qd, desired.qdd[k], q_d[k], desired.qd[k])
            sensordata[k] = self.data.sensordata
            self.driver.command(JointCommand(q_d[k], desired.qd[k], u_ff[k] + gains.ki * self._integral,
                                             gains.kp, gains.kd))
            self._integral += (q_d[k] - q) * self.dt
            self.pacer.record(*self.driver.wait_tick())
            self._observe()
            sensordata[k, self._u_columns] = self._u  # what the controller applied during tick k
            mujoco.mj_getState(self.model, self.data, states[k + 1], ROLLOUT_SPEC)
            if stop is not None and stop(k, states, sensordata):
                n = k + 1
                break
        return StepRecord(Desired(q_d[:n], desired.qd[:n], desired.qdd[:n]), states[: n + 1],
                          sensordata[:n], u_ff[:n])


class MujocoDriver:
    """A JointDriver over a MuJoCo simulation of the scene: the contract's reference
    implementation, and the stand-in for hardware in tests. ``pace``: tick in wall-clock time."""

    def __init__(self, scene: Scene, pace: bool = False):
        self.scene = scene
        self.model = copy.deepcopy(scene.model)  # the robot's own physics, apart from the mirror
        self.data = mujoco.MjData(self.model)
        self.model.body_gravcomp[scene.arm_bodies] = 0.0  # the runner sends gravity in u_ff
        self.pacer = Pacer(scene.robot.control_dt) if pace else None
        self.data.qpos[scene.qpos_adr] = scene.robot.home
        mujoco.mj_forward(self.model, self.data)

    def read(self) -> JointState:
        d, s = self.data, self.scene
        return JointState(d.time, d.qpos[s.qpos_adr].copy(), d.qvel[s.dof_adr].copy(),
                          s.applied_torque(d.sensordata).copy())

    def command(self, command: JointCommand) -> None:
        act = self.scene.actuator
        self.model.actuator_biasprm[act, 1] = -command.kp
        self.model.actuator_biasprm[act, 2] = -command.kd
        self.data.ctrl[act] = command.kp * command.q_d + command.kd * command.qd_d + command.u_ff

    def wait_tick(self) -> tuple[float, bool]:
        for _ in range(self.scene.substeps):
            mujoco.mj_step(self.model, self.data)
        return self.pacer.wait() if self.pacer is not None else (time.perf_counter(), False)
