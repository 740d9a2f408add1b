"""Desired trajectories at the control rate: resampling a learner's segment, and the
rest-to-rest minimum-jerk motion GOTO_START uses."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

# Peak speed and acceleration of a rest-to-rest minimum-jerk move of distance d in time T
# are 1.875 d/T and 10/sqrt(3) d/T^2.
MIN_JERK_PEAK_VELOCITY = 1.875
MIN_JERK_PEAK_ACCELERATION = 10.0 / np.sqrt(3.0)


@dataclass(frozen=True)
class Desired:
    """Desired joint state per control step: q rad, qd rad/s, qdd rad/s^2, each (n_steps, n_dofs)."""

    q: np.ndarray
    qd: np.ndarray
    qdd: np.ndarray

    def __len__(self) -> int:
        return self.q.shape[0]

    def then_hold(self, n_steps: int) -> Desired:
        """Append n_steps holding the last posture at rest."""
        if n_steps <= 0:
            return self
        hold = np.repeat(self.q[-1:], n_steps, axis=0)
        zeros = np.zeros_like(hold)
        return Desired(
            np.vstack([self.q, hold]), np.vstack([self.qd, zeros]), np.vstack([self.qdd, zeros])
        )

    @classmethod
    def hold(cls, q: np.ndarray, n_steps: int) -> Desired:
        """Hold posture q (n_dofs,) for n_steps."""
        q = np.repeat(np.asarray(q, float)[None], n_steps, axis=0)
        return cls(q, np.zeros_like(q), np.zeros_like(q))


def resample(q: np.ndarray, qd: np.ndarray | None, qdd: np.ndarray | None,
             rate: float, control_rate: float) -> Desired:
    """A learner's samples at ``rate`` Hz as a Desired at ``control_rate`` Hz.

    At the control rate the samples are used as given and missing derivatives are finite
    differences. At another rate q is interpolated by a cubic spline (Hermite when qd is
    given) over the same duration, and the derivatives come from the spline.
    """
    n = q.shape[0]
    if rate == control_rate or n == 1:
        qd = np.gradient(q, 1.0 / rate, axis=0) if qd is None and n > 1 else qd
        qd = np.zeros_like(q) if qd is None else qd
        qdd = np.gradient(qd, 1.0 / rate, axis=0) if qdd is None and n > 1 else qdd
        qdd = np.zeros_like(q) if qdd is None else qdd
        return Desired(q, qd, qdd)
    from scipy.interpolate import CubicHermiteSpline, CubicSpline  # here: scipy is a third of serve's start-up

    t = np.arange(n) / rate
    n_out = int(np.floor(t[-1] * control_rate + 1e-9)) + 1
    t_out = np.arange(n_out) / control_rate
    spline = CubicSpline(t, q, axis=0) if qd is None else CubicHermiteSpline(t, q, qd, axis=0)
    q_out = spline(t_out)
    qd_out = spline(t_out, 1)
    if qdd is None:
        qdd_out = spline(t_out, 2)
    else:
        qdd_out = CubicSpline(t, qdd, axis=0)(t_out)
    return Desired(q_out, qd_out, qdd_out)


def min_jerk_duration(q0: np.ndarray, q1: np.ndarray, max_velocity: np.ndarray,
                      max_acceleration: np.ndarray) -> float:
    """Shortest duration s of a rest-to-rest minimum-jerk move q0 -> q1 (n_dofs,) rad
    within the per-joint velocity (rad/s) and acceleration (rad/s^2) bounds."""
    d = np.abs(np.asarray(q1) - np.asarray(q0))
    t_vel = MIN_JERK_PEAK_VELOCITY * d / max_velocity
    t_acc = np.sqrt(MIN_JERK_PEAK_ACCELERATION * d / max_acceleration)
    return float(max(t_vel.max(), t_acc.max()))


def min_jerk(q0: np.ndarray, q1: np.ndarray, duration: float, dt: float) -> Desired:
    """Rest-to-rest minimum-jerk move from q0 to q1 (n_dofs,) rad over ``duration`` s,
    sampled every dt s; the last sample is q1 at rest."""
    n = max(int(np.ceil(duration / dt)), 1)
    s = (np.arange(1, n + 1) / n)[:, None]
    delta = (np.asarray(q1) - np.asarray(q0))[None]
    T = n * dt
    q = q0 + delta * (10 * s**3 - 15 * s**4 + 6 * s**5)
    qd = delta * (30 * s**2 - 60 * s**3 + 30 * s**4) / T
    qdd = delta * (60 * s - 180 * s**2 + 120 * s**3) / T**2
    return Desired(q, qd, qdd)
