"""Desired trajectories (episodic/interface/trajectory.py): the minimum-jerk move GOTO_START uses and
the resampling of a learner's segment to the control rate."""
from __future__ import annotations

import numpy as np
import pytest

from episodic.interface.robot import load_robot
from episodic.interface.trajectory import (
    MIN_JERK_PEAK_ACCELERATION,
    MIN_JERK_PEAK_VELOCITY,
    Desired,
    min_jerk,
    min_jerk_duration,
    resample,
)

ROBOT = load_robot("wam")
DT = ROBOT.control_dt
RATE = ROBOT.control_rate
FAR = np.array([1.2, -0.9, 2.0, 0.5, -3.0, 1.0, 2.5])  # a big move from home, inside the range


# ------------------------------------------------------------------ minimum jerk


def test_min_jerk_peak_constants():
    """1.875 d/T and 10/sqrt(3) d/T^2 are the peaks of s(t) = 10t^3 - 15t^4 + 6t^5."""
    t = np.linspace(0.0, 1.0, 200_001)
    v = 30 * t**2 - 60 * t**3 + 30 * t**4
    a = 60 * t - 180 * t**2 + 120 * t**3
    assert v.max() == pytest.approx(MIN_JERK_PEAK_VELOCITY, rel=1e-9)
    assert np.abs(a).max() == pytest.approx(MIN_JERK_PEAK_ACCELERATION, rel=1e-8)


@pytest.mark.parametrize("duration", [0.5, 1.0, 2.345])
def test_min_jerk_ends_at_rest_on_the_target(duration):
    q0, q1 = ROBOT.home, FAR
    move = min_jerk(q0, q1, duration, DT)
    assert isinstance(move, Desired)
    assert move.q.shape == move.qd.shape == move.qdd.shape == (int(np.ceil(duration / DT)), ROBOT.n_dofs)
    np.testing.assert_allclose(move.q[-1], q1, rtol=0, atol=1e-12)
    np.testing.assert_allclose(move.qd[-1], 0.0, atol=1e-12)
    np.testing.assert_allclose(move.qdd[-1], 0.0, atol=1e-10)


@pytest.mark.parametrize("duration", [0.5, 1.0, 2.345])
def test_min_jerk_starts_at_rest_from_the_start(duration):
    """The first sample is one control step into the move: q, qd, qdd all vanish with dt
    (as dt^3, dt^2, dt) from the start at rest at q0."""
    q0, q1 = ROBOT.home, FAR
    move = min_jerk(q0, q1, duration, DT)
    d = np.abs(q1 - q0)
    T = len(move) * DT
    s = DT / T
    np.testing.assert_allclose(np.abs(move.q[0] - q0), d * (10 * s**3 - 15 * s**4 + 6 * s**5), atol=1e-15)
    assert np.all(np.abs(move.q[0] - q0) <= 10 * d * s**3 + 1e-15)
    assert np.all(np.abs(move.qd[0]) <= 30 * d * s**2 / T + 1e-15)
    assert np.all(np.abs(move.qdd[0]) <= 60 * d * s / T**2 + 1e-15)
    # extrapolating one step back lands on q0 up to the jerk term, 60 d / T^3 * dt^3 / 6
    back = move.q[0] - move.qd[0] * DT + 0.5 * move.qdd[0] * DT**2
    assert np.all(np.abs(back - q0) <= 10 * d * s**3 + 1e-15)


def test_min_jerk_derivatives_are_consistent():
    move = min_jerk(ROBOT.home, FAR, 1.5, DT)
    q = np.vstack([ROBOT.home, move.q])
    qd = np.vstack([np.zeros(ROBOT.n_dofs), move.qd])
    np.testing.assert_allclose(np.gradient(q, DT, axis=0)[1:-1], qd[1:-1], atol=2e-5 * np.abs(FAR - ROBOT.home).max())
    np.testing.assert_allclose(np.gradient(qd, DT, axis=0)[1:-1], np.vstack([np.zeros(7), move.qdd])[1:-1],
                               atol=1e-4 * np.abs(FAR - ROBOT.home).max() * 10)


def test_min_jerk_is_monotonic_and_stays_between_the_endpoints():
    move = min_jerk(ROBOT.home, FAR, 1.0, DT)
    sign = np.sign(FAR - ROBOT.home)
    assert np.all(np.diff(move.q, axis=0) * sign >= -1e-15)
    lo, hi = np.minimum(ROBOT.home, FAR), np.maximum(ROBOT.home, FAR)
    assert np.all(move.q >= lo - 1e-12) and np.all(move.q <= hi + 1e-12)


@pytest.mark.parametrize("target", [FAR, ROBOT.home + 0.01, ROBOT.home + np.array([0, 0, 0, 0, 0, 0, 0.5])])
def test_min_jerk_duration_respects_the_bounds(target):
    goto = ROBOT.goto
    duration = min_jerk_duration(ROBOT.home, target, goto.max_velocity, goto.max_acceleration)
    move = min_jerk(ROBOT.home, target, duration, DT)
    peak_v = np.abs(move.qd).max(axis=0)
    peak_a = np.abs(move.qdd).max(axis=0)
    assert np.all(peak_v <= goto.max_velocity * (1 + 1e-9))
    assert np.all(peak_a <= goto.max_acceleration * (1 + 1e-9))
    # and it is the shortest such move: one bound is (nearly) reached on some joint
    tight = max((peak_v / goto.max_velocity).max(), (peak_a / goto.max_acceleration).max())
    assert tight > 0.98


def test_min_jerk_duration_scales_as_the_binding_bound():
    goto = ROBOT.goto
    d = np.zeros(ROBOT.n_dofs)
    d[0] = 1.0
    # acceleration-bound move: T = sqrt(5.77 d / a); velocity-bound: T = 1.875 d / v
    t_acc = min_jerk_duration(np.zeros(7), d, np.full(7, 1e9), goto.max_acceleration)
    assert t_acc == pytest.approx(np.sqrt(MIN_JERK_PEAK_ACCELERATION / goto.max_acceleration[0]))
    t_vel = min_jerk_duration(np.zeros(7), d, goto.max_velocity, np.full(7, 1e9))
    assert t_vel == pytest.approx(MIN_JERK_PEAK_VELOCITY / goto.max_velocity[0])
    assert min_jerk_duration(np.zeros(7), -d, goto.max_velocity, np.full(7, 1e9)) == t_vel


def test_min_jerk_to_the_same_posture():
    assert min_jerk_duration(ROBOT.home, ROBOT.home, ROBOT.goto.max_velocity, ROBOT.goto.max_acceleration) == 0.0
    move = min_jerk(ROBOT.home, ROBOT.home, 0.0, DT)
    assert len(move) == 1
    np.testing.assert_array_equal(move.q[0], ROBOT.home)
    np.testing.assert_array_equal(move.qd[0], 0.0)


# ------------------------------------------------------------------ Desired helpers


def test_hold_and_then_hold():
    hold = Desired.hold(ROBOT.home, 5)
    assert len(hold) == 5
    np.testing.assert_array_equal(hold.q, np.tile(ROBOT.home, (5, 1)))
    assert not hold.qd.any() and not hold.qdd.any()
    move = min_jerk(ROBOT.home, FAR, 0.1, DT)
    longer = move.then_hold(7)
    assert len(longer) == len(move) + 7
    np.testing.assert_array_equal(longer.q[len(move):], np.tile(move.q[-1], (7, 1)))
    assert not longer.qd[len(move):].any() and not longer.qdd[len(move):].any()
    assert move.then_hold(0) is move


# ------------------------------------------------------------------ resampling


def signal(t):
    """A smooth test signal (n, 7) with analytic derivatives."""
    t = np.asarray(t)[:, None]
    w = 2 * np.pi * np.array([0.5, 0.7, 1.0, 1.3, 0.4, 2.0, 0.9])
    a = np.array([0.4, 0.3, 0.2, 0.3, 0.5, 0.1, 0.2])
    q = ROBOT.home + a * np.sin(w * t + 0.3)
    return q, a * w * np.cos(w * t + 0.3), -a * w**2 * np.sin(w * t + 0.3)


def test_resample_at_the_control_rate_returns_the_samples():
    q, qd, qdd = signal(np.arange(300) * DT)
    out = resample(q, qd, qdd, RATE, RATE)
    assert out.q is q and out.qd is qd and out.qdd is qdd


def test_resample_at_the_control_rate_fills_in_finite_differences():
    q, qd, qdd = signal(np.arange(300) * DT)
    out = resample(q, None, None, RATE, RATE)
    np.testing.assert_array_equal(out.q, q)
    np.testing.assert_array_equal(out.qd, np.gradient(q, DT, axis=0))
    np.testing.assert_allclose(out.qd[1:-1], qd[1:-1], atol=2e-4)
    np.testing.assert_allclose(out.qdd[2:-2], qdd[2:-2], atol=2e-3 * np.abs(qdd).max())
    out = resample(q, qd, None, RATE, RATE)
    np.testing.assert_array_equal(out.qdd, np.gradient(qd, DT, axis=0))


def test_resample_a_single_sample():
    q = ROBOT.home[None]
    out = resample(q, None, None, 100.0, RATE)
    assert len(out) == 1
    np.testing.assert_array_equal(out.q, q)
    assert not out.qd.any() and not out.qdd.any()


@pytest.mark.parametrize("with_qd,with_qdd", [(False, False), (True, False), (True, True)])
def test_resample_100_hz_to_500_hz_matches_the_signal(with_qd, with_qdd):
    rate = 100.0
    t_in = np.arange(201) / rate  # 2 s
    q, qd, qdd = signal(t_in)
    out = resample(q, qd if with_qd else None, qdd if with_qdd else None, rate, RATE)
    t_out = np.arange(len(out)) * DT
    q_true, qd_true, qdd_true = signal(t_out)
    # duration preserved: the same 2 s at 500 Hz, ending on the last input sample
    assert len(out) == 1001
    assert t_out[-1] == pytest.approx(t_in[-1])
    np.testing.assert_allclose(out.q[-1], q[-1], atol=1e-12)
    np.testing.assert_allclose(out.q[::5], q, atol=1e-12)  # passes through every input sample
    inner = slice(10, -10)  # spline end conditions cost accuracy on the first and last interval
    assert np.abs(out.q - q_true).max() < 1e-4
    assert np.abs(out.qd[inner] - qd_true[inner]).max() < (2e-3 if with_qd else 1e-2)
    assert np.abs(out.qdd[inner] - qdd_true[inner]).max() < (1e-3 if with_qdd else 0.2)
    # relative to the signal: about 0.1 % in qd and (from q alone) about 1 % in qdd
    assert np.abs(out.qd[inner] - qd_true[inner]).max() < 0.01 * np.abs(qd_true).max()
    assert np.abs(out.qdd[inner] - qdd_true[inner]).max() < 0.02 * np.abs(qdd_true).max()


@pytest.mark.parametrize("rate,n_in", [(100.0, 101), (100.0, 57), (250.0, 250), (1000.0, 2001), (333.0, 100)])
def test_resample_preserves_the_duration(rate, n_in):
    q, _, _ = signal(np.arange(n_in) / rate)
    out = resample(q, None, None, rate, RATE)
    duration_in = (n_in - 1) / rate
    duration_out = (len(out) - 1) * DT
    assert duration_out <= duration_in + 1e-12
    assert duration_out > duration_in - DT
    np.testing.assert_allclose(out.q[0], q[0], atol=1e-12)


def test_resample_1000_hz_down_to_500_hz_keeps_every_other_sample():
    q, qd, _ = signal(np.arange(2001) / 1000.0)
    out = resample(q, qd, None, 1000.0, RATE)
    np.testing.assert_allclose(out.q, q[::2], atol=1e-12)
    np.testing.assert_allclose(out.qd, qd[::2], atol=1e-12)
