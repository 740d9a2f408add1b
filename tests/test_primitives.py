"""episodic.learning.primitives against the defining equations: the DMP's transformation and canonical
systems (and a numerical ODE solution of them), imitation, temporal scaling and convergence to
the goal; the ProMP's basis derivatives, fit, sampling and Gaussian conditioning."""
from __future__ import annotations

import numpy as np
import pytest
from scipy.integrate import solve_ivp

from episodic.learning.primitives import DMP, ProMP, promp_basis, samples

DT = 0.002


@pytest.fixture
def motion():
    rng = np.random.default_rng(0)
    dmp = DMP(2.0, 10)
    weights = rng.normal(0.0, 50.0, (10, 3))
    start, goal = np.array([0.1, -0.2, 0.3]), np.array([0.5, 0.0, -0.4])
    return dmp, weights, start, goal


def test_the_rollout_solves_the_transformation_system(motion):
    dmp, w, start, goal = motion
    tr = dmp.rollout(w, start, goal, DT)
    assert tr.q.shape == tr.qd.shape == tr.qdd.shape == (1001, 3) and tr.t[-1] == pytest.approx(2.0)
    assert np.array_equal(tr.q[0], start) and np.array_equal(tr.qd[0], np.zeros(3))
    # tau^2 qdd = alpha_y (beta_y (g - q) - tau qd) + f(x) at every sample
    f = dmp.basis(tr.t) @ w
    residual = dmp.duration**2 * tr.qdd - (dmp.alpha_y * (dmp.beta_y * (goal - tr.q) - dmp.duration * tr.qd) + f)
    assert np.abs(residual).max() < 1e-9
    # and matches an accurate numerical solution of the ODE (the forcing held linear between samples)
    def rhs(t, s):
        return np.r_[s[3:], dmp.acceleration(np.array([t]), s[None, :3], s[None, 3:], goal, w)[0]]
    sol = solve_ivp(rhs, (0.0, 2.0), np.r_[start, 0, 0, 0], t_eval=tr.t, method="DOP853", rtol=1e-11, atol=1e-12)
    assert np.abs(sol.y[:3].T - tr.q).max() < 1e-6       # rad
    assert np.abs(sol.y[3:].T - tr.qd).max() < 1e-5      # rad/s
    # velocity is the derivative of position (trapezoid between samples)
    assert np.abs(np.diff(tr.q, axis=0) - DT * (tr.qd[1:] + tr.qd[:-1]) / 2).max() < 1e-6


def test_the_canonical_system_and_basis():
    dmp = DMP(1.5, 8)
    t = samples(1.5, DT)
    x = dmp.phase(t)
    assert x[0] == 1.0 and x[-1] == pytest.approx(0.01)       # x(tau) = 0.01
    np.testing.assert_allclose(np.gradient(x, t)[1:-1], -dmp.alpha_x / dmp.duration * x[1:-1], rtol=1e-5)
    phi = dmp.basis(t)
    np.testing.assert_allclose(phi.sum(axis=1), x)             # normalised kernels, times x
    assert np.all(np.diff(dmp.centres) < 0)


def test_without_forcing_the_motion_is_a_critically_damped_spring(motion):
    dmp, _, start, goal = motion
    tr = dmp.rollout(np.zeros((10, 3)), start, goal, DT)
    omega = dmp.alpha_y / (2 * dmp.duration)                 # alpha_y = 4 beta_y: critical damping
    expected = goal + (start - goal) * ((1 + omega * tr.t) * np.exp(-omega * tr.t))[:, None]
    assert np.abs(tr.q - expected).max() < 1e-10


def test_imitation_recovers_the_weights_and_reproduces_a_demonstration(motion):
    dmp, w, start, goal = motion
    tr = dmp.rollout(w, start, goal, DT)
    np.testing.assert_allclose(dmp.imitate(tr.t, tr.q, tr.qd, tr.qdd, goal=goal), w, atol=1e-5)
    # a demonstration that is not a DMP: reproduced closely with enough weights
    t = samples(2.0, DT)
    demo = np.column_stack([0.3 * (1 - np.cos(np.pi * t / 2)), 0.2 * np.sin(np.pi * t / 2) ** 2])
    fine = DMP(2.0, 30)
    rep = fine.rollout(fine.imitate(t, demo), demo[0], demo[-1], DT)
    assert np.abs(rep.q - demo).max() < 2e-3


def test_temporal_scaling_and_run_time(motion):
    dmp, w, start, goal = motion
    tr = dmp.rollout(w, start, goal, DT)
    slow = dmp.with_duration(3.0).rollout(w, start, goal, DT * 1.5)
    np.testing.assert_allclose(slow.q, tr.q, atol=1e-12)
    np.testing.assert_allclose(slow.qd * 1.5, tr.qd, atol=1e-10)
    long = dmp.rollout(w, start, goal, DT, run_time=5.0)
    np.testing.assert_array_equal(long.q[:len(tr)], tr.q)
    assert np.abs(long.q[-1] - goal).max() < 1e-4 and np.abs(long.qd[-1]).max() < 1e-3


def test_bad_shapes_are_refused(motion):
    dmp, w, start, goal = motion
    with pytest.raises(ValueError, match="weights must be"):
        dmp.rollout(w[:, :2], start, goal, DT)
    with pytest.raises(ValueError, match="duration"):
        DMP(0.0)
    with pytest.raises(ValueError, match="positive"):
        dmp.rollout(w, start, goal, -1.0)


def test_promp_basis_derivatives_match_finite_differences():
    z = np.linspace(0, 1, 20001)
    b, db, ddb = promp_basis(z, 8)
    np.testing.assert_allclose(b.sum(axis=1), 1.0)
    h = z[1] - z[0]
    np.testing.assert_allclose(np.gradient(b, h, axis=0)[5:-5], db[5:-5], atol=1e-4 * np.abs(db).max())
    np.testing.assert_allclose(np.gradient(db, h, axis=0)[5:-5], ddb[5:-5], atol=1e-4 * np.abs(ddb).max())


@pytest.fixture
def promp():
    rng = np.random.default_rng(1)
    t = samples(1.0, 0.01)
    demos = []
    for _ in range(30):
        a, b = rng.normal(1.0, 0.2), rng.normal(0.0, 0.3)
        demos.append((t, np.column_stack([a * np.sin(np.pi * t), b * t + 0.1 * a])))
    return ProMP.from_demonstrations(demos, n_weights=15), demos


def test_promp_fits_the_demonstrations_distribution(promp):
    pm, demos = promp
    qs = np.array([q for _, q in demos])
    mean = pm.mean_trajectory(0.01)
    assert np.abs(mean.q - qs.mean(axis=0)).max() < 5e-3
    np.testing.assert_allclose(pm.std(mean.t), qs.std(axis=0, ddof=1), atol=5e-3)
    # velocities and accelerations are the time derivatives of the positions
    np.testing.assert_allclose(np.gradient(mean.q, mean.t, axis=0)[2:-2], mean.qd[2:-2],
                               atol=2e-3 * np.abs(mean.qd).max())
    draws = pm.sample(4000, np.random.default_rng(2))
    np.testing.assert_allclose(draws.mean(axis=0), pm.mean, atol=0.02)


def test_promp_conditioning_passes_through_the_via_point(promp):
    pm, _ = promp
    via = np.array([1.3, 0.5])
    cond = pm.condition(0.5, via)
    q = cond.mean_trajectory(0.01).q
    np.testing.assert_allclose(q[50], via, atol=1e-4)
    assert np.all(cond.std(np.array([0.5])) < 1e-3)
    assert np.all(cond.std(np.array([0.0, 1.0])) > 0)  # elsewhere it stays uncertain
    # the conditional is Gaussian conditioning: against the joint covariance of (w, q(t*)) by hand
    h = np.kron(np.eye(2), promp_basis(np.array([0.5]), 15)[0][0])
    s_wy = pm.cov @ h.T
    s_yy = h @ pm.cov @ h.T + pm.noise * np.eye(2)
    np.testing.assert_allclose(cond.mean, pm.mean + s_wy @ np.linalg.solve(s_yy, via - h @ pm.mean), atol=1e-9)
    np.testing.assert_allclose(cond.cov, pm.cov - s_wy @ np.linalg.solve(s_yy, s_wy.T), atol=1e-9)
    samples_ = cond.sample(200, np.random.default_rng(3))
    at_via = np.array([cond.trajectory(w, 0.01).q[50] for w in samples_])
    assert np.abs(at_via - via).max() < 5e-3


def test_a_promp_needs_two_demonstrations():
    t = samples(1.0, 0.01)
    with pytest.raises(ValueError, match="two demonstrations"):
        ProMP.from_demonstrations([(t, np.zeros((len(t), 2)))])
