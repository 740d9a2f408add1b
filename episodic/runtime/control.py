"""SL's control law, ``u = kp (q_d - q) + kd (qd_d - qd) + ki I + u_ff``, one control tick at a
time: what the simulation's Python loop and a robot driver's loop both run (the simulation's
compiled loop, episodic/native/control.c, runs the same tick in C), and the joint velocity check
the episode machine applies to every step.

The law is split between the runner and whoever closes the loop. Each tick the runner's
``Controller.tick`` fixes the desired q_d (clamped to the joint range, plus the task's feedback
offset), the feedforward u_ff of the mode and the integral term ki I, then advances I; the
feedback part ``kp (q_d - q) + kd (qd_d - qd)`` and the torque limits are applied by MuJoCo's
actuators (simulation) or the robot's joint controller (driver).

A passive joint (``Gains.passive``: the task's passive joints and those that failed) gets no
part of the law: kp, kd and ki 0, no feedforward (the inverse dynamics of the other joints
still see it at its measured or desired state), and the simulation zeroes its actuator
(episodic.runtime.scene.Scene.set_passive).
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import mujoco
import numpy as np

from episodic.interface.trajectory import Desired
from episodic.interface.vocabulary import Feedforward
from episodic.runtime.scene import Scene

Feedback = Callable[[mujoco.MjData], np.ndarray]
Stop = Callable[[int, np.ndarray, np.ndarray], bool]


@dataclass(frozen=True)
class Gains:
    """Joint gains kp N m/rad, kd N m s/rad, ki N m/(rad s), each (n_dofs,), and u_ff mode;
    ``passive`` (n_dofs,) bool or None: the joints without actuation (see :meth:`with_passive`)."""

    kp: np.ndarray
    kd: np.ndarray
    ki: np.ndarray
    feedforward: Feedforward
    passive: np.ndarray | None = None

    @property
    def passive_mask(self) -> np.ndarray:
        """(n_dofs,) bool: true for the joints without actuation."""
        return np.zeros(np.shape(self.kp), bool) if self.passive is None else self.passive

    def with_passive(self, passive: np.ndarray) -> Gains:
        """These gains with the joints where ``passive`` (n_dofs,) bool is true (and those already
        passive) left without actuation: their kp, kd and ki 0, and no feedforward."""
        mask = np.asarray(passive, bool) | self.passive_mask
        kp, kd, ki = (np.where(mask, 0.0, gain) for gain in (self.kp, self.kd, self.ki))
        return Gains(kp, kd, ki, self.feedforward, mask)

    @property
    def state_dependent(self) -> bool:
        """True when ctrl needs the measured state (inverse dynamics or integral action)."""
        return self.feedforward == Feedforward.INVERSE_DYNAMICS or bool(np.any(self.ki))

    def reference(self, q_d: np.ndarray, qd_d: np.ndarray) -> np.ndarray:
        """kp q_d + kd qd_d N m, (..., n_dofs): the desired state's share of the PD law."""
        torques: np.ndarray = self.kp * q_d + self.kd * qd_d
        return torques


@dataclass
class Segment:
    """A run's desired motion as the controller tracks it; n = number of control steps.

    q_d: (n, n_dofs) rad, clamped to the joint range (tick k adds the task's feedback offset to
    row k); qd_d, qdd_d: (n, n_dofs) rad/s, rad/s^2; reference: (n, n_dofs) N m, kp q_d + kd qd_d;
    u_ff: (n, n_dofs) N m, the mode's feedforward (row k is final after tick k, except gravity
    compensation done by the plant, which leaves it 0).
    """

    gains: Gains
    feedback: Feedback | None
    feedforward: Feedforward  # what the runner adds to u_ff (NONE when the plant compensates gravity)
    q_d: np.ndarray
    qd_d: np.ndarray
    qdd_d: np.ndarray
    reference: np.ndarray
    u_ff: np.ndarray

    def __len__(self) -> int:
        return len(self.q_d)

    def desired(self, n: int) -> Desired:
        """The first n steps' desired state as tracked (q_d with the feedback offsets)."""
        return Desired(self.q_d[:n], self.qd_d[:n], self.qdd_d[:n])


class Controller:
    """The runner's side of the control law for one robot: the integral I rad s (n_dofs,) and
    inverse dynamics of the robot and its tool (``scene.dynamics``)."""

    def __init__(self, scene: Scene):
        self.robot = scene.robot
        self.dt = scene.robot.control_dt
        self._qpos_adr, self._dof_adr = scene.qpos_adr, scene.dof_adr
        self.integral = np.zeros(scene.robot.n_dofs)
        self.dynamics = scene.dynamics  # the robot and its tool alone, and its data: inverse dynamics
        self.dynamics_data = mujoco.MjData(scene.dynamics)
        self._zero = np.zeros(scene.robot.n_dofs)
        self.passive = scene.passive  # the task's passive joints, left out of every segment's law

    def reset_integral(self) -> None:
        """Start the integral term anew (I = 0)."""
        self.integral[:] = 0.0

    def inverse_dynamics(self, q: np.ndarray, qd: np.ndarray, qdd: np.ndarray) -> np.ndarray:
        """Joint torques N m (n_dofs,) of the robot and its tool at state (q rad, qd rad/s,
        qdd rad/s^2), each (n_dofs,)."""
        d = self.dynamics_data
        d.qpos[:] = q
        d.qvel[:] = qd
        d.qacc[:] = qdd
        mujoco.mj_inverse(self.dynamics, d)
        torques: np.ndarray = d.qfrc_inverse.copy()
        return torques

    def plan(self, desired: Desired, gains: Gains, feedback: Feedback | None,
             plant_gravity: bool) -> Segment:
        """The segment of ``desired`` (n steps) under ``gains``, before its first tick.
        ``plant_gravity``: the plant compensates gravity itself (MuJoCo's gravcomp), so gravity
        compensation adds nothing to u_ff; otherwise it is sent as u_ff = inverse dynamics at
        rest at the measured q."""
        q_d = self.robot.clamp(desired.q)
        gains = gains.with_passive(self.passive) if self.passive.any() else gains
        mode = Feedforward(gains.feedforward)
        if plant_gravity and mode == Feedforward.GRAVITY_COMPENSATION:
            mode = Feedforward.NONE
        return Segment(gains, feedback, mode, q_d, desired.qd, desired.qdd, gains.reference(q_d, desired.qd),
                       np.zeros_like(q_d))

    def _feedforward(self, seg: Segment, k: int, q: np.ndarray, data: mujoco.MjData) -> np.ndarray:
        """u_ff N m (n_dofs,) of step k at the measured q rad (n_dofs,) and the velocities in
        ``data``; FEEDFORWARD's is the inverse dynamics of the desired state without the feedback
        offset. 0 on passive joints."""
        mode = seg.feedforward
        if mode == Feedforward.FEEDFORWARD:
            u_ff = self.inverse_dynamics(seg.q_d[k], seg.qd_d[k], seg.qdd_d[k])
        elif mode == Feedforward.INVERSE_DYNAMICS:
            u_ff = self.inverse_dynamics(q, data.qvel[self._dof_adr], seg.qdd_d[k])
        elif mode == Feedforward.GRAVITY_COMPENSATION:
            u_ff = self.inverse_dynamics(q, self._zero, self._zero)
        else:
            return self._zero
        passive = seg.gains.passive
        return u_ff if passive is None else np.where(passive, 0.0, u_ff)

    def tick(self, seg: Segment, k: int, data: mujoco.MjData) -> np.ndarray:
        """Control step k with ``data`` the scene's present state, its position and velocity
        stages current (the simulated robot after mj_step1, or the measured joints written into
        the mirror and mj_forward; what the task's feedback law reads): sets
        seg.u_ff[k], adds the feedback offset to seg.q_d[k] (clamped) and updates
        seg.reference[k], advances the integral by (q_d - q) dt. Returns the integral term ki I
        N m (n_dofs,) of this step (I before the update); the command is then q_d, qd_d,
        u_ff + ki I under kp, kd."""
        q = data.qpos[self._qpos_adr]
        if seg.feedforward is not Feedforward.NONE:
            seg.u_ff[k] = self._feedforward(seg, k, q, data)
        if seg.feedback is not None:
            seg.q_d[k] = self.robot.clamp(seg.q_d[k] + seg.feedback(data))
            seg.reference[k] = seg.gains.reference(seg.q_d[k], seg.qd_d[k])
        u_i = seg.gains.ki * self.integral
        self.integral += (seg.q_d[k] - q) * self.dt
        return u_i


def velocity_over_limit(qd: np.ndarray, limit: np.ndarray) -> tuple[int, np.ndarray] | None:
    """The first row of joint velocities qd (n, n_dofs) rad/s with a joint over its limit
    (n_dofs,) rad/s or not finite: (row, indices of those joints), or None when all are within."""
    over = ~(np.abs(qd) <= limit)
    rows = np.flatnonzero(over.any(axis=1))
    if rows.size == 0:
        return None
    return int(rows[0]), np.flatnonzero(over[rows[0]])


def over_velocity_limit_after(scene: Scene, states: np.ndarray, k: int) -> bool:
    """Whether a robot joint of ``scene`` moves over its velocity limit (or not finitely) after
    step k: in states[k + 1] of a run's mjSTATE_FULLPHYSICS rows (how a run stepped tick by tick
    stops at the step the check would cut it)."""
    return velocity_over_limit(scene.joint_velocities(states[k + 1 : k + 2]), scene.robot.velocity_limit) is not None
