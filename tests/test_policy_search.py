"""episodic.learning.policy_search: each learner's update against its defining equations on known samples,
that each one climbs a quadratic, and the learning curve's bookkeeping and CSV."""
from __future__ import annotations

import numpy as np
import pytest

from episodic.learning.policy_search import Cmaes, Iteration, LearningCurve, Outcome, Power, Reps, exp_transform, learn


def quadratic(thetas: np.ndarray) -> np.ndarray:
    return -np.sum((np.atleast_2d(thetas) - 3.0) ** 2, axis=1)


def test_power_update_is_the_return_weighted_average_of_the_best():
    p = Power(np.zeros(2), sigma=1.0, n_best=2)
    samples = np.array([[1.0, 0.0], [0.0, 2.0], [5.0, 5.0]])
    p.tell(samples, np.array([1.0, 3.0, 0.0]))
    np.testing.assert_allclose(p.theta, (1.0 * samples[0] + 3.0 * samples[1]) / 4.0)
    # importance sampling: the best of all iterations stay in the memory
    p.tell(np.array([[9.0, 9.0]]), np.array([0.5]))
    best = np.array([[0.0, 2.0], [1.0, 0.0]])
    prev = (1.0 * samples[0] + 3.0 * samples[1]) / 4.0
    np.testing.assert_allclose(p.theta, prev + (3.0 * (best[0] - prev) + 1.0 * (best[1] - prev)) / 4.0)


def test_power_refuses_negative_returns_without_a_transform():
    p = Power(np.zeros(2), sigma=1.0)
    with pytest.raises(ValueError, match="exp_transform"):
        p.tell(np.zeros((2, 2)), np.array([-1.0, 1.0]))
    w = exp_transform(5.0)(np.array([-3.0, -1.0, 1.0]))
    np.testing.assert_allclose(w, np.exp(5.0 * np.array([-1.0, -0.5, 0.0])))


def test_reps_weights_solve_the_dual_and_meet_the_kl_bound():
    r = Reps(np.zeros(3), sigma=1.0, epsilon=0.5)
    returns = np.random.default_rng(0).normal(size=50)
    d = r.weights(returns)
    # the KL divergence of the reweighted samples from the uniform ones is the bound epsilon
    kl = np.sum(d * np.log(d * len(d)))
    assert kl == pytest.approx(0.5, abs=1e-3)
    # the dual's stationarity: epsilon + log mean exp(R / eta) - sum_i d_i R_i / eta = 0
    r_ = returns - returns.max()
    assert 0.5 + np.log(np.mean(np.exp(r_ / r.eta))) - d @ r_ / r.eta == pytest.approx(0.0, abs=1e-3)


@pytest.mark.parametrize("make", [
    lambda: Power(np.zeros(4), 1.0, n_samples=10, transform=exp_transform(), seed=1),
    lambda: Reps(np.zeros(4), 1.0, n_samples=20, seed=1),
    lambda: Cmaes(np.zeros(4), 1.0, seed=1),
], ids=["power", "reps", "cmaes"])
@pytest.mark.slow  # a learner's iteration loop
def test_each_learner_climbs_a_quadratic(make):
    learner = make()
    start = quadratic(learner.mean)[0]
    for _ in range(60):
        x = learner.ask()
        learner.tell(x, quadratic(x))
    assert start == -36.0 and quadratic(learner.mean)[0] > -0.5


@pytest.mark.slow  # a learner's iteration loop
def test_learn_records_a_curve_and_saves_it(tmp_path):
    def rollouts(thetas):
        r = quadratic(thetas)
        return Outcome(r, r > -1.0)

    curve = learn(Power(np.zeros(2), 0.5, n_samples=5, transform=exp_transform(), seed=0), rollouts, 30, echo=None)
    assert [row.rollouts for row in curve.rows[:3]] == [1, 6, 11]       # the start, then 5 samples each
    assert curve.rows[0].policy_return == -18.0 and curve.final_return > -1.0 and curve.final_success
    assert curve.first_success is not None and curve.rows[-1].success_rate > 0
    again = learn(Power(np.zeros(2), 0.5, n_samples=5, transform=exp_transform(), seed=0), rollouts, 30, echo=None)
    np.testing.assert_array_equal(curve.column("mean_return"), again.column("mean_return"))
    path = curve.save(tmp_path / "curve.csv")
    loaded = LearningCurve.load(path)
    assert loaded.rows == curve.rows and isinstance(loaded.rows[0], Iteration)
