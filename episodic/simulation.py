"""MuJoCo backend: runs a desired trajectory under SL's control law and returns what
happened at every control step.

Segments whose feedforward is known in advance (none, gravity compensation,
feedforward inverse dynamics) with no integral gain run in C through ``mujoco.rollout``;
inverse dynamics at the measured state and integral action step in Python. Both give
bit-identical results for the same ctrl sequence (tested).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import mujoco
import numpy as np
from mujoco import rollout

from episodic.commands import Feedforward
from episodic.pacing import Pacer
from episodic.scene import ROLLOUT_SPEC, STATE_SPEC, Scene
from episodic.trajectory import Desired

Feedback = Callable[[mujoco.MjData], np.ndarray]
Stop = Callable[[int, np.ndarray, np.ndarray], bool]
CONTROL_SPEC = int(mujoco.mjtState.mjSTATE_CTRL | mujoco.mjtState.mjSTATE_MOCAP_POS
                   | mujoco.mjtState.mjSTATE_MOCAP_QUAT)
# |ctrl| N m at most: far above every torque limit (the joint torque saturates there anyway) and
# below MuJoCo's "huge value" threshold (1e10), past which it would zero the controls
CTRL_BOUND = 1e9
# MuJoCo's warnings that it met a non-finite or huge value and reset or zeroed something
UNSTABLE_WARNINGS = tuple(int(w) for w in (mujoco.mjtWarning.mjWARN_BADQACC, mujoco.mjtWarning.mjWARN_BADQPOS,
                                            mujoco.mjtWarning.mjWARN_BADQVEL, mujoco.mjtWarning.mjWARN_BADCTRL))


class SimulationUnstable(RuntimeError):
    """The physics met a non-finite or huge value during a run (MuJoCo reset or zeroed part of
    its state); the simulation was put back where the run started."""


@dataclass(frozen=True)
class Gains:
    """Joint gains kp N m/rad, kd N m s/rad, ki N m/(rad s), each (n_dofs,), and u_ff mode."""

    kp: np.ndarray
    kd: np.ndarray
    ki: np.ndarray
    feedforward: Feedforward

    @property
    def state_dependent(self) -> bool:
        """True when ctrl needs the measured state (inverse dynamics or integral action)."""
        return self.feedforward == Feedforward.INVERSE_DYNAMICS or bool(np.any(self.ki))


@dataclass
class StepRecord:
    """Control steps of one run; n = number of steps.

    state: (n + 1, nstate) mjSTATE_FULLPHYSICS before each step and after the last;
    sensordata: (n, nsensordata) at the state before each step; u_ff: (n, n_dofs) N m,
    the feedforward torque (gravity compensation's is the applied torque minus the PD
    feedback, so under saturation it shows what got through).
    """

    desired: Desired
    state: np.ndarray
    sensordata: np.ndarray
    u_ff: np.ndarray

    def __len__(self) -> int:
        return self.sensordata.shape[0]

    @classmethod
    def join(cls, records: list["StepRecord"]) -> "StepRecord":
        """Consecutive records (each starting where the previous ended) as one."""
        desired = Desired(*(np.concatenate([getattr(r.desired, k) for r in records]) for k in ("q", "qd", "qdd")))
        states = np.concatenate([r.state[:-1] for r in records] + [records[-1].state[-1:]])
        return cls(desired, states, np.concatenate([r.sensordata for r in records]),
                   np.concatenate([r.u_ff for r in records]))

    def truncate(self, n: int) -> "StepRecord":
        """The first n steps."""
        d = self.desired
        return StepRecord(Desired(d.q[:n], d.qd[:n], d.qdd[:n]), self.state[: n + 1],
                          self.sensordata[:n], self.u_ff[:n])


class Simulation:
    """One MjData stepping a Scene; the state between calls is the robot's state."""

    def __init__(self, scene: Scene, pacer: Pacer | None = None):
        """``pacer``: step in wall-clock time, one control step per period (non-blocking mode);
        None: as fast as the CPU allows (blocking mode)."""
        self.scene = scene
        self.pacer = pacer
        self.model = scene.model
        self.data = mujoco.MjData(self.model)
        self._dyn_data = mujoco.MjData(scene.dynamics)
        self._integral = np.zeros(scene.robot.n_dofs)
        self._rollout = rollout.Rollout(nthread=0)
        self.dt = scene.robot.control_dt
        self.nstate = mujoco.mj_stateSize(self.model, ROLLOUT_SPEC)
        self.version = 0  # bumped by every change of the state through this class (see touch)

    def touch(self) -> None:
        """Note that the state changed (callers that write to ``data`` directly call this)."""
        self.version += 1

    # -- state ---------------------------------------------------------------
    def reset(self, q: np.ndarray) -> None:
        """Robot at rest at q (n_dofs,) rad, everything else at the model's defaults."""
        mujoco.mj_resetData(self.model, self.data)
        self.data.qpos[self.scene.qpos_adr] = q
        mujoco.mj_forward(self.model, self.data)
        self._integral[:] = 0.0
        self.touch()

    def get_state(self, spec: int = STATE_SPEC) -> np.ndarray:
        """The state of ``spec``; by default the full integration state (time, qpos, qvel, act,
        warmstart, ctrl, mocap, ...)."""
        out = np.empty(mujoco.mj_stateSize(self.model, spec))
        mujoco.mj_getState(self.model, self.data, out, spec)
        return out

    def set_state(self, state: np.ndarray, spec: int = STATE_SPEC) -> None:
        mujoco.mj_setState(self.model, self.data, np.asarray(state, float), spec)
        mujoco.mj_forward(self.model, self.data)
        self.touch()

    def reset_integral(self) -> None:
        self._integral[:] = 0.0

    @property
    def q(self) -> np.ndarray:
        return self.data.qpos[self.scene.qpos_adr].copy()

    @property
    def qd(self) -> np.ndarray:
        return self.data.qvel[self.scene.dof_adr].copy()

    # -- control -------------------------------------------------------------
    def apply_gains(self, gains: Gains) -> None:
        """Put kp, kd in the actuators' bias and switch MuJoCo's gravity compensation."""
        act = self.scene.actuator
        self.model.actuator_biasprm[act, 1] = -gains.kp
        self.model.actuator_biasprm[act, 2] = -gains.kd
        on = gains.feedforward == Feedforward.GRAVITY_COMPENSATION
        self.model.body_gravcomp[self.scene.arm_bodies] = 1.0 if on else 0.0

    def inverse_dynamics(self, q: np.ndarray, qd: np.ndarray, qdd: np.ndarray) -> np.ndarray:
        """Joint torques N m (n_dofs,) of the robot and its tool at state (q, qd, qdd)."""
        d = self._dyn_data
        m = self.scene.dynamics
        d.qpos[:] = q
        d.qvel[:] = qd
        d.qacc[:] = qdd
        mujoco.mj_inverse(m, d)
        return d.qfrc_inverse.copy()

    def run(self, desired: Desired, gains: Gains, feedback: Feedback | None = None,
            stop: Stop | None = None) -> StepRecord:
        """Run len(desired) control steps from the current state under ``gains``.

        ``feedback(data)``, when given, is called before each step with the present state and
        returns offsets (n_dofs,) rad added to that step's desired q (a task's feedback law);
        the record holds the desired q actually used. ``stop(k, states, sensordata)`` is asked
        after step k when stepping one step at a time (paced, or state-dependent control) and
        ends the run there when true; a run in one piece ignores it and the caller truncates.
        """
        if len(desired) == 0:
            return StepRecord(desired, self.get_state(ROLLOUT_SPEC)[None], np.zeros((0, self.model.nsensordata)),
                              np.zeros((0, self.scene.robot.n_dofs)))
        self.apply_gains(gains)
        self.touch()
        start, warnings = self.get_state(ROLLOUT_SPEC), self._warnings()
        q_d = self.scene.robot.clamp(desired.q)
        reference = gains.kp * q_d + gains.kd * desired.qd
        if gains.state_dependent or feedback is not None or self.pacer is not None:
            states, sensordata, ctrl, u_ff = self._run_python(desired, q_d, reference, gains, feedback, stop)
            n = len(sensordata)
            desired = Desired(q_d[:n], desired.qd[:n], desired.qdd[:n])
        else:
            states, sensordata, ctrl, u_ff = self._run_rollout(desired, q_d, reference, gains)
        if gains.feedforward == Feedforward.GRAVITY_COMPENSATION:
            # MuJoCo adds the gravity torque to the actuator force; recover its share
            q = self.scene.qpos(states[:-1])[:, self.scene.qpos_adr]
            qd = self.scene.qvel(states[:-1])[:, self.scene.dof_adr]
            u_ff = self.scene.applied_torque(sensordata) - (ctrl - gains.kp * q - gains.kd * qd)
        if self._warnings() != warnings:
            self.set_state(start, ROLLOUT_SPEC)
            raise SimulationUnstable("the simulation became unstable (MuJoCo met a non-finite or huge "
                                     "acceleration, position, velocity or control); lower the gains or "
                                     "smooth the segment")
        return StepRecord(desired, states, sensordata, u_ff)

    def _warnings(self) -> tuple[int, ...]:
        """Counts of MuJoCo's instability warnings so far."""
        return tuple(int(self.data.warning[w].number) for w in UNSTABLE_WARNINGS)

    def _planned_feedforward(self, desired: Desired, q_d: np.ndarray, gains: Gains) -> np.ndarray:
        """u_ff (n, n_dofs) N m known before the segment: inverse dynamics of the desired state in
        FEEDFORWARD mode, zero otherwise (gravity compensation happens inside MuJoCo)."""
        if gains.feedforward == Feedforward.FEEDFORWARD:
            return np.array([self.inverse_dynamics(*row) for row in zip(q_d, desired.qd, desired.qdd)])
        return np.zeros_like(q_d)

    def _run_rollout(self, desired, q_d, reference, gains):
        n = len(desired)
        u_ff = self._planned_feedforward(desired, q_d, gains)
        ctrl = np.clip(reference + u_ff, -CTRL_BOUND, CTRL_BOUND)
        # rollout resets the inputs it is not given, so mocap poses travel with ctrl
        control = np.zeros((n, self.model.nu))
        control[:, self.scene.actuator] = ctrl
        mocap = np.concatenate([self.data.mocap_pos.ravel(), self.data.mocap_quat.ravel()])
        control = np.hstack([control, np.broadcast_to(mocap, (n, mocap.size))])
        sub = self.scene.substeps
        start = self.get_state(ROLLOUT_SPEC)
        state, sensordata = self._rollout.rollout(
            self.model, self.data, start, np.repeat(control, sub, axis=0)[None],
            control_spec=CONTROL_SPEC, initial_warmstart=self.data.qacc_warmstart.copy()[None],
        )
        states = np.vstack([start[None], state[0, sub - 1 :: sub]])
        return states, sensordata[0, ::sub], ctrl, u_ff

    def _run_python(self, desired, q_d, reference, gains, feedback, stop):
        n = len(desired)
        m, d = self.model, self.data
        states = np.empty((n + 1, self.nstate))
        sensordata = np.empty((n, m.nsensordata))
        ctrl = np.empty_like(reference)
        u_ff = self._planned_feedforward(desired, q_d, gains)
        qa, va, act = self.scene.qpos_adr, self.scene.dof_adr, self.scene.actuator
        inverse = gains.feedforward == Feedforward.INVERSE_DYNAMICS
        mujoco.mj_getState(m, d, states[0], ROLLOUT_SPEC)
        for k in range(n):
            if self.pacer is not None:
                self.pacer.wait()
            q = d.qpos[qa]
            if feedback is not None:
                q_d[k] = self.scene.robot.clamp(q_d[k] + feedback(d))
                reference[k] = gains.kp * q_d[k] + gains.kd * desired.qd[k]
            if inverse:
                u_ff[k] = self.inverse_dynamics(q, d.qvel[va], desired.qdd[k])
            ctrl[k] = np.clip(reference[k] + gains.ki * self._integral + u_ff[k], -CTRL_BOUND, CTRL_BOUND)
            d.ctrl[act] = ctrl[k]
            self._integral += (q_d[k] - q) * self.dt
            for s in range(self.scene.substeps):
                mujoco.mj_step(m, d)
                if s == 0:
                    sensordata[k] = d.sensordata
            mujoco.mj_getState(m, d, states[k + 1], ROLLOUT_SPEC)
            if stop is not None and stop(k, states, sensordata):
                n = k + 1
                break
        return states[: n + 1], sensordata[:n], ctrl[:n], u_ff[:n]
