"""MuJoCo backend: runs a desired trajectory under SL's control law and returns what
happened at every control step.

A blocking run goes whole through the compiled loop of ``episodic.native`` (C: the control tick,
inverse dynamics at the measured state, the integral term and the task's compiled feedback law
between MuJoCo's steps, the GIL released), or, in an install without the compiled library, whole
through the same loop in Python. A paced run, or one under a feedback law written in
Python, steps in Python, one ``episodic.runtime.control.Controller.tick`` per control step (the tick a
robot driver's loop runs). Both give bit-identical results, and those of ``mujoco.rollout`` for
the same ctrl sequence (tested).
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import mujoco
import numpy as np

from episodic import native
from episodic.interface.trajectory import Desired
from episodic.interface.vocabulary import Feedforward
from episodic.native import CompiledLaw
from episodic.runtime.control import Controller, Feedback, Gains, Segment, Stop, over_velocity_limit_after
from episodic.runtime.pacing import Pacer
from episodic.runtime.scene import ROLLOUT_SPEC, STATE_SPEC, Scene

# |ctrl| N m at most: far above every torque limit (the joint torque saturates there anyway) and
# below MuJoCo's "huge value" threshold (1e10), past which it would zero the controls
CTRL_BOUND = 1e9
# MuJoCo's warnings that it met a non-finite or huge value and reset or zeroed something (indices
# of MjData.warning)
UNSTABLE_WARNINGS = np.array([int(w) for w in (mujoco.mjtWarning.mjWARN_BADQACC, mujoco.mjtWarning.mjWARN_BADQPOS,
                                               mujoco.mjtWarning.mjWARN_BADQVEL, mujoco.mjtWarning.mjWARN_BADCTRL)])


class SimulationUnstable(RuntimeError):
    """The physics met a non-finite or huge value during a run (MuJoCo reset or zeroed part of
    its state); the simulation was put back where the run started."""


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
        return int(self.sensordata.shape[0])

    @classmethod
    def join(cls, records: list[StepRecord]) -> StepRecord:
        """Consecutive records (each starting where the previous ended) as one."""
        desired = Desired(*(np.concatenate([getattr(r.desired, k) for r in records]) for k in ("q", "qd", "qdd")))
        states = np.concatenate([r.state[:-1] for r in records] + [records[-1].state[-1:]])
        return cls(desired, states, np.concatenate([r.sensordata for r in records]),
                   np.concatenate([r.u_ff for r in records]))

    def truncate(self, n: int) -> StepRecord:
        """The first n steps."""
        d = self.desired
        return StepRecord(Desired(d.q[:n], d.qd[:n], d.qdd[:n]), self.state[: n + 1],
                          self.sensordata[:n], self.u_ff[:n])


class Simulation:
    """One MjData stepping a Scene; the state between calls is the robot's state. A Backend
    (episodic.runtime.backend); with a ``pacer`` it runs in wall-clock time."""

    def __init__(self, scene: Scene, pacer: Pacer | None = None, between_ticks: Callable[[], None] | None = None):
        """``pacer``: step in wall-clock time, one control step per period (non-blocking mode);
        None: as fast as the CPU allows (blocking mode). ``between_ticks()``: called after every
        paced control step, to use a little of the time left before the next tick (the runner
        writes queued log pieces there); it must return well within a control period."""
        self.scene = scene
        self.pacer = pacer
        self.between_ticks = between_ticks
        self.model = scene.model
        self.data = mujoco.MjData(self.model)
        self.controller = Controller(scene)
        self.nstate = mujoco.mj_stateSize(self.model, ROLLOUT_SPEC)
        # the compiled loop's arguments that stay the same from run to run, worked out once: the
        # structs' addresses, the robot's qpos and dof addresses and actuators (int32) and its joint
        # range rad (arrays kept here, so that their addresses stay valid)
        self._native_arrays = (*(np.ascontiguousarray(a, dtype=np.int32)
                                 for a in (scene.qpos_adr, scene.dof_adr, scene.actuator)),
                               np.ascontiguousarray(scene.robot.range_lower, dtype=float),
                               np.ascontiguousarray(scene.robot.range_upper, dtype=float))
        qpos_adr, dof_adr, actuator, lower, upper = self._native_arrays
        c = self.controller
        self._native_fixed = dict(
            model=self.model._address, data=self.data._address, dynamics=c.dynamics._address,
            dynamics_data=c.dynamics_data._address, n_dofs=scene.robot.n_dofs, substeps=scene.substeps,
            state_spec=int(ROLLOUT_SPEC), qpos_adr=native.address(qpos_adr, np.int32),
            dof_adr=native.address(dof_adr, np.int32), actuator=native.address(actuator, np.int32),
            lower=native.address(lower), upper=native.address(upper), dt=c.dt, ctrl_bound=CTRL_BOUND)
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
        self.controller.reset_integral()
        self.touch()

    def get_state(self, spec: int = STATE_SPEC) -> np.ndarray:
        """The state (mj_stateSize(spec),) of ``spec``; by default the full integration state
        (time, qpos, qvel, act, warmstart, ctrl, mocap, ...)."""
        out = np.empty(mujoco.mj_stateSize(self.model, spec))
        mujoco.mj_getState(self.model, self.data, out, spec)
        return out

    def set_state(self, state: np.ndarray, spec: int = STATE_SPEC) -> None:
        """Put the MjData in ``state`` (mj_stateSize(spec),) of ``spec``."""
        mujoco.mj_setState(self.model, self.data, np.asarray(state, float), spec)
        mujoco.mj_forward(self.model, self.data)
        self.touch()

    def reset_integral(self) -> None:
        """Start the integral term anew."""
        self.controller.reset_integral()

    @property
    def q(self) -> np.ndarray:
        """Robot joint positions rad (n_dofs,) now (a copy)."""
        return np.array(self.data.qpos[self.scene.qpos_adr])

    @property
    def qd(self) -> np.ndarray:
        """Robot joint velocities rad/s (n_dofs,) now (a copy)."""
        return np.array(self.data.qvel[self.scene.dof_adr])

    @property
    def can_start_exactly(self) -> bool:
        """Whether an episode may start from the exact start state (episodic.runtime.start): a
        blocking simulation can; a paced one runs in wall-clock time from where it is."""
        return self.pacer is None

    # -- control -------------------------------------------------------------
    def apply_gains(self, gains: Gains) -> None:
        """Put kp, kd in the actuators' bias, switch MuJoCo's gravity compensation, and leave the
        passive joints (the gains' and the task's) without any torque (Scene.set_passive)."""
        act = self.scene.actuator
        self.model.actuator_biasprm[act, 1] = -gains.kp
        self.model.actuator_biasprm[act, 2] = -gains.kd
        self.scene.set_passive(self.model, gains.passive_mask)
        on = gains.feedforward == Feedforward.GRAVITY_COMPENSATION
        self.model.body_gravcomp[self.scene.arm_bodies] = 1.0 if on else 0.0

    def run(self, desired: Desired, gains: Gains, feedback: Feedback | None = None,
            stop: Stop | None = None) -> StepRecord:
        """Run len(desired) control steps from the current state under ``gains``.

        ``feedback(data)``, when given, is called before each step with the present state and
        returns offsets (n_dofs,) rad added to that step's desired q (a task's feedback law;
        ``Task.feedback_law``); the record holds the desired q actually used. A blocking run
        under no law or a compiled one (``episodic.native.CompiledLaw``) runs in C in one piece
        (in Python, with the same results, when the library was not built: ``native.compiled``);
        otherwise it steps in Python. ``stop(k, states, sensordata)`` is asked after step k when
        stepping in Python and ends the run there when true; a run in one piece ignores it and
        the caller truncates.
        """
        if len(desired) == 0:
            return StepRecord(desired, self.get_state(ROLLOUT_SPEC)[None], np.zeros((0, self.model.nsensordata)),
                              np.zeros((0, self.scene.robot.n_dofs)))
        self.apply_gains(gains)
        self.touch()
        start, warnings = self.get_state(ROLLOUT_SPEC), self._warnings()
        seg = self.controller.plan(desired, gains, feedback, plant_gravity=True)
        if self.pacer is None and (feedback is None or isinstance(feedback, CompiledLaw)):
            integral = self.controller.integral.copy()
            law_memory = None if feedback is None else feedback.memory
            memory = None if law_memory is None else law_memory.copy()
            # without the compiled library (an install without a C compiler) the same run in Python
            states, sensordata, ctrl = self._run_compiled(seg) if native.compiled() else self._run_python(seg, None)
            if self._warnings() != warnings:
                # unstable somewhere in the run: run it again tick by tick, stopped where a paced
                # run stops, at the first joint velocity over its limit, so that a segment that
                # crosses the limit before it blows up is cut there in both modes
                self.set_state(start, ROLLOUT_SPEC)
                self.controller.integral[:] = integral
                if law_memory is not None:
                    law_memory[:] = memory
                warnings = self._warnings()
                seg = self.controller.plan(desired, gains, feedback, plant_gravity=True)
                states, sensordata, ctrl = self._run_python(seg, self._over_velocity_limit)
        else:
            states, sensordata, ctrl = self._run_python(seg, stop)
        n = len(sensordata)
        u_ff = seg.u_ff[:n]
        if gains.feedforward == Feedforward.GRAVITY_COMPENSATION:
            # MuJoCo adds the gravity torque to the actuator force; recover its share
            q = self.scene.joint_positions(states[:-1])
            qd = self.scene.joint_velocities(states[:-1])
            u_ff = self.scene.applied_torque(sensordata) - (ctrl - gains.kp * q - gains.kd * qd)
        if self._warnings() != warnings:
            self.set_state(start, ROLLOUT_SPEC)
            raise SimulationUnstable("the simulation became unstable (MuJoCo met a non-finite or huge "
                                     "acceleration, position, velocity or control); lower the gains or "
                                     "smooth the segment")
        return StepRecord(seg.desired(n), states, sensordata, u_ff)

    def _over_velocity_limit(self, k: int, states: np.ndarray, sensordata: np.ndarray) -> bool:
        """Whether a robot joint's velocity after step k is over its limit (a ``Stop``)."""
        return over_velocity_limit_after(self.scene, states, k)

    def _warnings(self) -> tuple[int, ...]:
        """Counts of MuJoCo's instability warnings so far."""
        return tuple(self.data.warning.number[UNSTABLE_WARNINGS].tolist())

    def _run_compiled(self, seg: Segment) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The segment in C (episodic.native: the loop of ``_run_python`` with ``Controller.tick``
        and the task's compiled feedback law, operation for operation): states (n + 1, nstate),
        sensordata (n, nsensordata), ctrl (n, n_dofs) N m. Fills seg.q_d, reference and u_ff as
        the ticks would and advances the controller's integral. mujoco.FatalError when MuJoCo
        met an error (the MjData left where it stopped); ValueError on arrays of the wrong shape
        (which C would read past)."""
        n = len(seg)
        m, c, gains, robot = self.model, self.controller, seg.gains, self.scene.robot
        kp, kd, ki = (np.ascontiguousarray(g, dtype=float) for g in (gains.kp, gains.kd, gains.ki))
        qd_d, qdd_d = np.ascontiguousarray(seg.qd_d, dtype=float), np.ascontiguousarray(seg.qdd_d, dtype=float)
        passive = np.ascontiguousarray(gains.passive_mask, dtype=np.uint8)
        shapes = [a.shape for a in (kp, kd, ki, passive)] + [a.shape[1:] for a in (seg.q_d, qd_d, qdd_d)]
        if set(shapes) != {(robot.n_dofs,)} or qd_d.shape[0] != n or qdd_d.shape[0] != n:
            raise ValueError(f"a run needs desired q, qd, qdd of shape (n, {robot.n_dofs}) and gains of shape "
                             f"({robot.n_dofs},); got q {seg.q_d.shape}, qd {qd_d.shape}, qdd {qdd_d.shape}, "
                             f"kp {kp.shape}, kd {kd.shape}, ki {ki.shape}")
        states = np.empty((n + 1, self.nstate))
        sensordata = np.empty((n, m.nsensordata))
        ctrl = np.empty_like(seg.reference)
        law = seg.feedback
        if law is not None and not isinstance(law, CompiledLaw):
            raise TypeError("the compiled loop runs a CompiledLaw only; a law in Python steps in Python "
                            "(Simulation.run)")
        args = native.SegmentArgs(
            **self._native_fixed, n=n, feedforward=int(seg.feedforward), kp=native.address(kp),
            kd=native.address(kd), ki=native.address(ki), passive=native.address(passive, np.uint8),
            q_d=native.address(seg.q_d), qd_d=native.address(qd_d), qdd_d=native.address(qdd_d),
            reference=native.address(seg.reference), u_ff=native.address(seg.u_ff),
            integral=native.address(c.integral), law=None if law is None else law.function,
            law_param=None if law is None else native.address(law.param),
            law_memory=None if law is None else native.address(law.memory),
            states=native.address(states), sensordata=native.address(sensordata), ctrl=native.address(ctrl))
        native.run(args)
        return states, sensordata, ctrl

    def _run_python(self, seg: Segment, stop: Stop | None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The segment one control tick at a time (``Controller.tick``), paced when there is a
        pacer, until ``stop``: states (n + 1, nstate), sensordata (n, nsensordata), ctrl
        (n, n_dofs) N m, n the steps run.

        Each control step's first physics step is split around the tick: mj_step1 computes the
        present state's positions and velocities (what the tick and the task's feedback law
        read), mj_step2 finishes the step under the tick's ctrl (together exactly mj_step).
        With several physics steps per control step (scene.substeps = S), the reference share
        kp q_d + kd qd_d ramps linearly within control step k from its sample k towards sample
        k + 1, as planned before the task's feedback offsets (physics step s gets s / S of the
        difference; the last step of a run holds), so that the desired state moves on between
        control ticks instead of jumping at each: holding it instead lags the reference by up to
        a control period and costs tracking. u_ff and the integral term stay as the tick set
        them. ctrl[k] is what physics step 0 gets (the sensors' step)."""
        n = len(seg)
        m, d = self.model, self.data
        states = np.empty((n + 1, self.nstate))
        sensordata = np.empty((n, m.nsensordata))
        ctrl = np.empty_like(seg.reference)
        act = self.scene.actuator
        tick = self.controller.tick
        sub = self.scene.substeps
        weights = np.arange(sub) / sub
        planned = seg.reference.copy()  # before the feedback offsets the ticks add
        step = np.zeros(seg.reference.shape[1])
        mujoco.mj_getState(m, d, states[0], ROLLOUT_SPEC)
        for k in range(n):
            if self.pacer is not None:
                self.pacer.wait()
            mujoco.mj_step1(m, d)
            u_i = tick(seg, k, d)
            ctrl[k] = np.clip(seg.reference[k] + u_i + seg.u_ff[k], -CTRL_BOUND, CTRL_BOUND)
            d.ctrl[act] = ctrl[k]
            mujoco.mj_step2(m, d)
            sensordata[k] = d.sensordata
            if sub > 1:
                step = planned[k + 1] - planned[k] if k + 1 < n else np.zeros_like(step)
            for s in range(1, sub):
                d.ctrl[act] = np.clip(seg.reference[k] + weights[s] * step + u_i + seg.u_ff[k], -CTRL_BOUND, CTRL_BOUND)
                mujoco.mj_step(m, d)
            mujoco.mj_getState(m, d, states[k + 1], ROLLOUT_SPEC)
            if self.pacer is not None and self.between_ticks is not None:
                self.between_ticks()
            if stop is not None and stop(k, states, sensordata):
                n = k + 1
                break
        return states[: n + 1], sensordata[:n], ctrl[:n]
