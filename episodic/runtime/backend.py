"""The seam between the runner and a robot driven one control tick at a time.

The runner's episode machine talks to a ``Backend``: ``Simulation`` is the MuJoCo one (with a
``Pacer`` it runs in wall-clock time). A real robot plugs in through a ``JointDriver``: three
calls per control tick, wrapped by ``DriverBackend`` into a Backend. Both run the same
control-law tick (``episodic.runtime.control.Controller.tick``).

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
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

import mujoco
import numpy as np

from episodic.interface.trajectory import Desired
from episodic.runtime.control import Feedback, Gains, Stop
from episodic.runtime.pacing import Pacer
from episodic.runtime.scene import ROLLOUT_SPEC, STATE_SPEC, Scene
from episodic.runtime.simulation import Simulation, StepRecord


@runtime_checkable
class Backend(Protocol):
    """What the episode machine drives: a robot, simulated or real, with the scene's MuJoCo model.

    Units SI; n_dofs joints in the robot settings' order; a "state" is a MuJoCo state vector of
    a ``mujoco.mjtState`` spec (mj_stateSize(model, spec),). Between calls ``data`` holds the
    present state of the scene (for a real robot: the measured joints written into the model).
    """

    model: mujoco.MjModel  # the scene's compiled model
    data: mujoco.MjData    # the scene's present state; a caller that writes to it calls touch()

    @property
    def pacer(self) -> Pacer | None:
        """The wall-clock tick record when control steps are paced, else None."""

    @property
    def version(self) -> int:
        """A counter that changes whenever the state changes (for caching what depends on it)."""

    @property
    def q(self) -> np.ndarray:
        """Robot joint positions rad (n_dofs,) now (a copy)."""

    @property
    def qd(self) -> np.ndarray:
        """Robot joint velocities rad/s (n_dofs,) now (a copy)."""

    @property
    def can_start_exactly(self) -> bool:
        """Whether an episode may start from the exact start state (episodic.runtime.start):
        ``reset`` puts the whole scene there and time stops between commands (a blocking
        simulation); otherwise an episode starts where the go-to-start left the robot."""

    def touch(self) -> None:
        """Note that ``data`` was changed from outside (bumps ``version``)."""

    def reset(self, q: np.ndarray) -> None:
        """Start from the robot at rest at q rad (n_dofs,) (a real robot: where it is) with the
        integral term at zero."""

    def get_state(self, spec: int = STATE_SPEC) -> np.ndarray:
        """The present state of ``spec`` (by default mjSTATE_INTEGRATION)."""

    def set_state(self, state: np.ndarray, spec: int = STATE_SPEC) -> None:
        """Put the scene in ``state`` of ``spec`` (replay; a real robot raises RuntimeError)."""

    def reset_integral(self) -> None:
        """Start the integral term of the control law anew."""

    def apply_gains(self, gains: Gains) -> None:
        """Set ``gains`` where the backend keeps them between runs (a simulation: the model's
        actuators), as a run under them would."""

    def run(self, desired: Desired, gains: Gains, feedback: Feedback | None = None,
            stop: Stop | None = None) -> StepRecord:
        """Run len(desired) control steps from the present state under ``gains`` and return
        what happened (states are mjSTATE_FULLPHYSICS rows). ``feedback(data)`` returns offsets
        rad (n_dofs,) added to each step's desired q; ``stop(k, states, sensordata)``, asked
        after step k when stepping a tick at a time, ends the run there when true."""


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


@runtime_checkable
class ReportingDriver(JointDriver, Protocol):
    """A JointDriver that keeps its own tick record and reports on itself (e.g. a robot across
    a network, episodic.runtime.link): ``pacer`` is the record DriverBackend keeps the ticks in
    (its marks may carry the driver's own counters into an episode's ``ticks``), ``note()``
    says what went wrong since it was last asked ('' when nothing), for the next reply."""

    pacer: Pacer

    def note(self) -> str: ...


class DriverBackend:
    """The Backend of a JointDriver. The MuJoCo model is a mirror: a never stepped Simulation of
    the scene, into which each tick the measured joint state is written for the logged
    end-effector pose and the task's sensors (task objects a real robot cannot observe stay
    where the task put them). ``between_ticks()``: called after every tick (e.g. to write
    queued log pieces in the rest of the control period)."""

    def __init__(self, scene: Scene, driver: JointDriver, between_ticks: Callable[[], None] | None = None):
        self.scene = scene
        self.driver = driver
        self.between_ticks = between_ticks
        self.pacer = driver.pacer if isinstance(driver, ReportingDriver) else Pacer(scene.robot.control_dt)
        self.mirror = Simulation(scene)
        self.model, self.data = self.mirror.model, self.mirror.data
        self._u_columns = [scene.sensors[f"u/{name}"].start for name in scene.robot.joint_names]

    @property
    def version(self) -> int:
        """The mirror's state counter (see Backend.version)."""
        return self.mirror.version

    def touch(self) -> None:
        """Note that the mirror's state changed."""
        self.mirror.touch()

    @property
    def q(self) -> np.ndarray:
        """Joint positions rad (n_dofs,) last measured."""
        return self.mirror.q

    @property
    def qd(self) -> np.ndarray:
        """Joint velocities rad/s (n_dofs,) last measured."""
        return self.mirror.qd

    def get_state(self, spec: int = STATE_SPEC) -> np.ndarray:
        """The mirror's state of ``spec``."""
        return self.mirror.get_state(spec)

    @property
    def can_start_exactly(self) -> bool:
        """False: a robot starts where the go-to-start left it."""
        return False

    def reset_integral(self) -> None:
        """Start the integral term anew."""
        self.mirror.reset_integral()

    def apply_gains(self, gains: Gains) -> None:
        """Nothing to set: the gains go to the joint controller with each tick's command (``run``)."""

    def note(self) -> str:
        """What the driver reports went wrong since it was last asked ('' when nothing, or when
        it is not a ReportingDriver)."""
        return self.driver.note() if isinstance(self.driver, ReportingDriver) else ""

    def _observe(self) -> np.ndarray:
        """Write the driver's measured state into the mirror; returns the torque u N m (n_dofs,)
        the joint controller applied during the previous tick."""
        state = self.driver.read()
        d = self.data
        d.time = state.time
        d.qpos[self.scene.qpos_adr] = state.q
        d.qvel[self.scene.dof_adr] = state.qd
        mujoco.mj_forward(self.model, d)
        self.touch()
        return state.u

    def reset(self, q: np.ndarray) -> None:
        """A real robot cannot be put anywhere: take it where it is (``q`` is ignored)."""
        self._observe()
        self.reset_integral()

    def set_state(self, state: np.ndarray, spec: int = STATE_SPEC) -> None:
        """Refused: a robot's state cannot be set."""
        raise RuntimeError("a robot's state cannot be set; replay needs a simulation backend")

    def run(self, desired: Desired, gains: Gains, feedback: Feedback | None = None,
            stop: Stop | None = None) -> StepRecord:
        """Run len(desired) ticks on the robot (see Backend.run); gravity compensation is sent
        in u_ff, and each step's "u" sensor columns hold the torque the joint controller
        applied during that tick."""
        n = len(desired)
        controller = self.mirror.controller
        seg = controller.plan(desired, gains, feedback, plant_gravity=False)
        states = np.empty((n + 1, self.mirror.nstate))
        sensordata = np.empty((n, self.model.nsensordata))
        self._observe()
        mujoco.mj_getState(self.model, self.data, states[0], ROLLOUT_SPEC)
        for k in range(n):
            u_i = controller.tick(seg, k, self.data)
            sensordata[k] = self.data.sensordata
            self.driver.command(JointCommand(seg.q_d[k], seg.qd_d[k], seg.u_ff[k] + u_i, gains.kp, gains.kd))
            self.pacer.record(*self.driver.wait_tick())
            sensordata[k, self._u_columns] = self._observe()  # what the controller applied during tick k
            mujoco.mj_getState(self.model, self.data, states[k + 1], ROLLOUT_SPEC)
            if self.between_ticks is not None:
                self.between_ticks()
            if stop is not None and stop(k, states, sensordata):
                n = k + 1
                break
        return StepRecord(seg.desired(n), states[: n + 1], sensordata[:n], seg.u_ff[:n])


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
