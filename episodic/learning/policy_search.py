"""Episodic policy search: PoWER, episodic REPS and CMA-ES behind one ask/tell interface, and the
loop that evaluates each iteration's samples as one batch and records a learning curve.

    learner = Power(theta0, sigma=0.05, n_samples=10)
    for _ in range(iterations):
        thetas = learner.ask()                 # (n_samples, n_params)
        returns = evaluate(thetas)             # (n_samples,): one batch of episodes
        learner.tell(thetas, returns)
    learner.mean                               # the policy (n_params,)

``learn`` runs that loop with a ``Rollouts`` (parameters -> episodes -> one batch -> returns and
successes) and returns a ``LearningCurve`` (one row per iteration; ``save`` writes it as CSV).
The exploration of every learner comes from ``numpy.random.default_rng(seed)`` (CMA-ES: pycma's
own seed), and blocking batches depend only on their commands, so a seed gives the same curve
bit for bit.

References: PoWER, Kober & Peters, "Policy search for motor primitives in robotics", Machine
Learning 84, 2011 (episodic form with importance sampling); episodic REPS, Peters, Muelling &
Altun, AAAI 2010, in the form of Deisenroth, Neumann & Peters, "A survey on policy search for
robotics", 2013, section 2.4.2; CMA-ES, Hansen's ``cma`` package (``pip install 'episodic[learn]'``).
"""
from __future__ import annotations

import csv
import time
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np
from scipy.optimize import minimize_scalar

from episodic.interface.commands import Command

if TYPE_CHECKING:
    from episodic.tools.batch import TaskSpec  # imported where rollouts run: the batch module is large


class Learner(Protocol):
    """Ask for samples, tell their returns (higher is better); ``mean`` is the current policy."""

    mean: np.ndarray

    def ask(self) -> np.ndarray: ...

    def tell(self, samples: np.ndarray, returns: np.ndarray) -> None: ...


def _vector(name: str, value, n: int) -> np.ndarray:
    out = np.broadcast_to(np.asarray(value, float), (n,)).copy()
    if not np.all(np.isfinite(out)) or np.any(out < 0):
        raise ValueError(f"{name} must be finite and non-negative, got {value}")
    return out


@dataclass
class Power:
    """PoWER, episodic, with importance sampling. Each iteration draws ``n_samples`` parameter
    vectors theta + eps, eps ~ N(0, diag(sigma^2)); then, over the ``n_best`` rollouts with the
    highest returns of all iterations so far (importance sampling: good old rollouts are reused),

        theta <- theta + sum_i R_i (theta_i - theta) / sum_i R_i

    Returns are used as weights, so they must be >= 0 (a reward read as an improper
    probability); ``transform`` maps other returns to such weights (e.g. ``exp_transform``).
    With ``adapt_sigma`` the exploration follows the same weighting, sigma^2 <- sum_i R_i
    (theta_i - theta)^2 / sum_i R_i (theta before the update), kept within [``sigma_min``, the
    initial sigma]. (On ball-in-a-cup, letting it only shrink, or importance sampling over only
    the best 5, made it collapse before the first catch in 2 of 5 seeds; with the best 10 and
    this cap every one of those seeds caught.)"""

    theta: np.ndarray
    sigma: np.ndarray | float
    n_samples: int = 10
    n_best: int = 10
    seed: int = 0
    transform: Callable[[np.ndarray], np.ndarray] | None = None
    adapt_sigma: bool = False
    sigma_min: float = 0.0
    memory: list[tuple[np.ndarray, float]] = field(default_factory=list, repr=False)

    def __post_init__(self) -> None:
        self.theta = np.array(self.theta, float)
        self.sigma = _vector("sigma", self.sigma, self.theta.size)
        self._sigma0 = self.sigma.copy()
        self._rng = np.random.default_rng(self.seed)

    @property
    def mean(self) -> np.ndarray:
        return self.theta

    def ask(self) -> np.ndarray:
        return self.theta + self.sigma * self._rng.standard_normal((self.n_samples, self.theta.size))

    def tell(self, samples: np.ndarray, returns: np.ndarray) -> None:
        samples, returns = np.asarray(samples, float), np.asarray(returns, float)
        self.memory += list(zip(samples, returns))
        thetas = np.array([m[0] for m in self.memory])
        raw = np.array([m[1] for m in self.memory])
        weights = raw if self.transform is None else self.transform(raw)
        if np.any(weights < 0) or not np.all(np.isfinite(weights)):
            raise ValueError("PoWER needs finite returns >= 0 as weights: give a transform (e.g. exp_transform) "
                             "for a task whose returns can be negative")
        best = np.argsort(-weights, kind="stable")[: self.n_best]
        w = weights[best]
        if w.sum() <= 0:
            return
        eps = thetas[best] - self.theta
        self.theta = self.theta + w @ eps / w.sum()
        if self.adapt_sigma:
            var = w @ eps**2 / w.sum()
            self.sigma = np.clip(np.sqrt(var), self.sigma_min, self._sigma0)


def exp_transform(beta: float = 10.0) -> Callable[[np.ndarray], np.ndarray]:
    """Returns R -> exp(beta (R - max R) / (max R - min R)): weights in (0, 1], the best 1, the
    worst exp(-beta); for PoWER on returns that can be negative."""
    def transform(returns: np.ndarray) -> np.ndarray:
        spread = np.ptp(returns)
        return np.exp(beta * (returns - returns.max()) / (spread if spread > 0 else 1.0))
    return transform


@dataclass
class Reps:
    """Episodic REPS: a Gaussian search distribution N(theta, Sigma) (diagonal unless
    ``full_covariance``), each iteration ``n_samples`` samples, reweighted by

        d_i = exp(R_i / eta),  eta = argmin_eta  eta epsilon + eta log mean_i exp(R_i / eta)

    (the dual of: maximise the expected return subject to KL(new || old) <= ``epsilon``, solved
    with scipy), then the weighted mean and the weighted covariance of the samples around the
    old mean (as PoWER's variance update and CMA-ES's rank-mu update do), plus ``min_variance``
    on the diagonal. (The maximum-likelihood covariance around the new mean collapses early: on a
    5-d quadratic from 3 rad away, 20 samples, epsilon 0.5, it stalled 1-3 rad short in 60
    iterations in 5 seeds of 5, where this reached the optimum in all.)"""

    theta: np.ndarray
    sigma: np.ndarray | float
    n_samples: int = 20
    epsilon: float = 0.5
    seed: int = 0
    full_covariance: bool = False
    min_variance: float = 1e-10
    eta: float = float("nan")  # the last dual solution

    def __post_init__(self) -> None:
        self.theta = np.array(self.theta, float)
        self.cov = np.diag(_vector("sigma", self.sigma, self.theta.size) ** 2)
        self._rng = np.random.default_rng(self.seed)

    @property
    def mean(self) -> np.ndarray:
        return self.theta

    def ask(self) -> np.ndarray:
        return self._rng.multivariate_normal(self.theta, self.cov, size=self.n_samples, method="cholesky")

    def weights(self, returns: np.ndarray) -> np.ndarray:
        """The sample weights d (n,) (normalised to sum 1) for ``returns`` (n,); sets ``eta``."""
        r = np.asarray(returns, float) - np.max(returns)
        scale = max(float(np.ptp(r)), 1e-12)

        def dual(log_eta: float) -> float:
            eta = np.exp(log_eta) * scale
            return eta * self.epsilon + eta * np.log(np.mean(np.exp(r / eta)))

        log_eta = minimize_scalar(dual, bounds=(-12.0, 12.0), method="bounded", options={"xatol": 1e-9}).x
        self.eta = float(np.exp(log_eta) * scale)
        d = np.exp(r / self.eta)
        return d / d.sum()

    def tell(self, samples: np.ndarray, returns: np.ndarray) -> None:
        samples = np.asarray(samples, float)
        d = self.weights(returns)
        diff = samples - self.theta
        self.theta = d @ samples
        cov = (diff * d[:, None]).T @ diff if self.full_covariance else np.diag(d @ diff**2)
        self.cov = cov + self.min_variance * np.eye(self.theta.size)


class Cmaes:
    """CMA-ES (Hansen's ``cma``, ask/tell), maximising the return: ``sigma`` the initial step size,
    ``stds`` (n_params,) per-parameter scales of it, ``n_samples`` the population (default
    pycma's 4 + 3 ln n)."""

    def __init__(self, theta: np.ndarray, sigma: float, n_samples: int | None = None, seed: int = 0,
                 stds: np.ndarray | None = None):
        try:
            import cma
        except ImportError:
            raise ImportError("CMA-ES needs pycma: pip install 'episodic[learn]'") from None
        options: dict[str, Any] = {"seed": seed + 1, "verbose": -9}  # pycma reads seed 0 as "from the clock"
        if n_samples is not None:
            options["popsize"] = n_samples
        if stds is not None:
            options["CMA_stds"] = np.asarray(stds, float)
        self.es = cma.CMAEvolutionStrategy(np.asarray(theta, float), float(sigma), options)

    @property
    def mean(self) -> np.ndarray:
        return np.asarray(self.es.mean, float)

    @property
    def n_samples(self) -> int:
        return int(self.es.popsize)

    def ask(self) -> np.ndarray:
        return np.array(self.es.ask())

    def tell(self, samples: np.ndarray, returns: np.ndarray) -> None:
        self.es.tell(list(np.asarray(samples, float)), list(-np.asarray(returns, float)))


# -- evaluating samples -------------------------------------------------------------------------
@dataclass
class Outcome:
    """The episodes of one batch: ``returns`` (n,), ``success`` (n,) bool."""

    returns: np.ndarray
    success: np.ndarray

    def split(self, n: int) -> tuple[Outcome, Outcome]:
        """The first n episodes and the rest."""
        return Outcome(self.returns[:n], self.success[:n]), Outcome(self.returns[n:], self.success[n:])


Evaluator = Callable[[list[list[Command]]], list]  # episodes -> EpisodeResults (a batch call)


@dataclass
class Rollouts:
    """Turns parameter vectors into episodes and evaluates them as one batch: ``episode(theta,
    episode_id)`` -> the episode's commands; ``evaluate(episodes)`` -> one EpisodeResult each
    (``episodic.tools.batch.evaluate`` partially applied, or a bridge ``Client.evaluate``). Each episode
    scores the runner's return, which charges an episode that ends early (a safety abort, a
    refused command) for what it left out (``Task.worst_reward_rate``); ``failed_return``, when
    given, replaces the return of every episode that does not end with Flag.OK."""

    episode: Callable[[np.ndarray, int], list[Command]]
    evaluate: Evaluator
    failed_return: float | None = None
    next_id: int = 1

    def __call__(self, thetas: np.ndarray) -> Outcome:
        from episodic.interface.vocabulary import Flag

        episodes = [self.episode(theta, self.next_id + k) for k, theta in enumerate(thetas)]
        self.next_id += len(episodes)
        results = self.evaluate(episodes)
        returns = [r.episode_return if r.flag == Flag.OK or self.failed_return is None else self.failed_return
                   for r in results]
        return Outcome(np.array(returns), np.array([r.success for r in results]))


# -- the loop and its curve -----------------------------------------------------------------------
@dataclass
class Iteration:
    """One row of a learning curve: ``iteration`` (0 = the start policy alone), ``rollouts``
    sample episodes so far (the start's included, the policy evaluations not), the samples'
    ``mean_return``, ``best_return`` and ``success_rate``; ``policy_return`` and
    ``policy_success`` of the policy (the learner's mean) the samples were drawn around, when
    evaluated (else nan and False); ``seconds`` wall time so far."""

    iteration: int
    rollouts: int
    mean_return: float
    best_return: float
    success_rate: float
    policy_return: float
    policy_success: bool
    seconds: float


@dataclass
class LearningCurve:
    """One Iteration per row; ``final_return`` / ``final_success``: the policy after the last
    update (nan / False when not evaluated); ``successes`` every sample episode's success in
    order (the start's first)."""

    rows: list[Iteration] = field(default_factory=list)
    final_return: float = float("nan")
    final_success: bool = False
    successes: list[bool] = field(default_factory=list)

    @property
    def first_success(self) -> int | None:
        """Sample episodes run up to and including the first successful one (None: none succeeded)."""
        hits = np.flatnonzero(self.successes)
        return int(hits[0]) + 1 if hits.size else None

    def reliable_after(self, window: int = 20, rate: float = 0.8) -> int | None:
        """Sample episodes run until, for the first time, at least ``rate`` of the last ``window``
        succeeded (None: never)."""
        hits = np.convolve(np.asarray(self.successes, float), np.ones(window), mode="valid")
        good = np.flatnonzero(hits >= rate * window - 1e-9)
        return int(good[0]) + window if good.size else None

    def column(self, name: str) -> np.ndarray:
        """One column over the iterations (n_iterations + 1,)."""
        return np.array([getattr(r, name) for r in self.rows])

    def save(self, path: str | Path) -> Path:
        """Write the curve as CSV (one row per iteration, the columns of Iteration)."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "w", newline="") as f:
            writer = csv.writer(f)
            writer.writerow([fl.name for fl in fields(Iteration)])
            writer.writerows([getattr(r, fl.name) for fl in fields(Iteration)] for r in self.rows)
        return path

    @classmethod
    def load(cls, path: str | Path) -> LearningCurve:
        """The rows of a curve written by ``save``."""
        with open(path, newline="") as f:
            rows = list(csv.DictReader(f))
        convert: dict[str, Callable[[str], Any]] = {"int": int, "float": float, "bool": lambda text: text == "True"}
        kinds = {fl.name: convert[str(fl.type)] for fl in fields(Iteration)}  # the annotations' text
        return cls([Iteration(**{k: kinds[k](v) for k, v in row.items()}) for row in rows])


HEADER = (f"{'iter':>5} {'rollouts':>8} {'mean':>10} {'best':>10} {'success':>8} {'policy':>10} "
          f"{'succeeds':>9} {'s':>7}")


def learn(learner: Learner, rollouts: Callable[[np.ndarray], Outcome], iterations: int,
          evaluate_mean: bool = True, stop: Callable[[LearningCurve], bool] | None = None,
          echo: Callable[[str], None] | None = print) -> LearningCurve:
    """Run up to ``iterations`` ask/evaluate/tell iterations of ``learner``; each iteration's
    samples are one ``rollouts`` batch, with ``evaluate_mean`` the policy they were drawn around
    added to it (and the final policy evaluated after the last update). Row 0 is the start policy
    alone. ``stop(curve)`` ends the run early when true. ``echo`` gets a header, one line per
    iteration and, with ``evaluate_mean``, a last line "final" with the final policy's return and
    success (None: quiet)."""
    t0 = time.perf_counter()
    curve = LearningCurve()

    def record(iteration: int, samples: Outcome, policy: Outcome | None) -> None:
        done = curve.rows[-1].rollouts if curve.rows else 0
        curve.successes += [bool(x) for x in samples.success]
        row = Iteration(iteration, done + len(samples.returns), float(samples.returns.mean()),
                        float(samples.returns.max()), float(samples.success.mean()),
                        float(policy.returns[0]) if policy is not None else float("nan"),
                        bool(policy.success[0]) if policy is not None else False, time.perf_counter() - t0)
        curve.rows.append(row)
        if echo is not None:
            echo(f"{row.iteration:>5} {row.rollouts:>8} {row.mean_return:>10.4g} {row.best_return:>10.4g} "
                 f"{row.success_rate:>8.0%} {row.policy_return:>10.4g} {'yes' if row.policy_success else 'no':>9} "
                 f"{row.seconds:>7.1f}")

    if echo is not None:
        echo(HEADER)
    start = rollouts(learner.mean[None, :])
    record(0, start, start)
    for iteration in range(1, iterations + 1):
        thetas = learner.ask()
        batch = rollouts(np.vstack([thetas, learner.mean]) if evaluate_mean else thetas)
        samples, policy = batch.split(len(thetas))
        learner.tell(thetas, samples.returns)
        record(iteration, samples, policy if evaluate_mean else None)
        if stop is not None and stop(curve):
            break
    if evaluate_mean:
        final = rollouts(learner.mean[None, :])
        curve.final_return, curve.final_success = float(final.returns[0]), bool(final.success[0])
        if echo is not None:
            last = curve.rows[-1]
            echo(f"{'final':>5} {last.rollouts:>8} {'':>10} {'':>10} {'':>8} {curve.final_return:>10.4g} "
                 f"{'yes' if curve.final_success else 'no':>9} {time.perf_counter() - t0:>7.1f}")
    return curve


# -- a task to learn ------------------------------------------------------------------------------
@dataclass
class Problem:
    """A task to learn: ``task`` as episodic.tools.batch takes it (a name or (name, params)), the start
    parameters ``theta0`` (n_params,), ``episode(theta, episode_id)`` -> that episode's commands,
    ``representation`` in words (e.g. "DMP, 7 joints x 10 weights"), ``failed_return`` (None: the
    runner's return) the score of an episode that does not end with Flag.OK."""

    task: TaskSpec
    theta0: np.ndarray
    episode: Callable[[np.ndarray, int], list[Command]]
    representation: str
    failed_return: float | None = None

    def rollouts(self, threads: int = 1, robot: str = "wam", seed: int = 0) -> Rollouts:
        """Rollouts evaluated in this process by ``episodic.tools.batch.evaluate`` on ``threads`` threads
        (runner seed ``seed``)."""
        from episodic.tools.batch import evaluate

        return Rollouts(self.episode, partial(evaluate, task=self.task, robot=robot, threads=threads, seed=seed),
                        self.failed_return)
