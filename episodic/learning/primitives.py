"""Movement primitives in joint space: discrete DMPs and ProMPs, rolled out at the control rate.

Both return a ``JointTrajectory`` (t, q, qd, qdd) that feeds ``TrajectoryCommand`` /
``send_trajectory`` as it is, and both are linear in their weights, so a learner's parameter
vector is a weight matrix ravelled.

**DMP** (Ijspeert, Nakanishi, Hoffmann, Pastor & Schaal, "Dynamical movement primitives",
Neural Computation 25(2), 2013, eqs. 2.1-2.3, with the forcing term not scaled by g - y0, as in
Pastor et al. 2009 and DFKI's ``movement_primitives``, so a joint that starts and ends at the
same angle can still move), for each joint independently::

    tau^2 qdd = alpha_y (beta_y (g - q) - tau qd) + f(x)          (transformation system)
    tau xd    = -alpha_x x,   x(0) = 1                             (canonical system)
    f(x)      = x sum_i psi_i(x) w_i / sum_i psi_i(x),  psi_i(x) = exp(-h_i (x - c_i)^2)

tau s is the duration, g rad the goal, w_i rad the weights (f is in rad, like tau^2 qdd).
alpha_y = 25, beta_y = alpha_y / 4 (critically damped), alpha_x = ln 100 (x(tau) = 0.01, so the
forcing has faded at the end and q converges to g). The centres c_i are the phase at n_weights
times evenly spaced over [0, tau], the widths h_i = 1 / (overlap (c_{i+1} - c_i))^2.

The rollout is exact for a forcing term linear between control steps (the system's
matrix exponential with a first-order hold, no Euler steps), and because the system is linear
it is precomputed once per (duration, dt, length) as responses to the start, the goal and each
weight: a rollout is one matrix product (tens of microseconds for 7 joints and 1000 steps, where
a per-step Python integration takes tens of milliseconds). qdd at each sample is the
transformation system evaluated there, so the defining equation holds exactly at the samples.
A DMP learned at one duration plays at any other (temporal scaling: same weights, the motion
stretched in time).

**ProMP** (Paraschos, Daniel, Peters & Neumann, "Probabilistic movement primitives", NIPS 2013):
q(t) = Phi(z)^T w per joint, z = t / T the phase, Phi the normalised Gaussian basis, the weights of
all joints one Gaussian N(mean, cov) fitted to several demonstrations (ridge regression per
demonstration, then their sample mean and covariance), sampled, and conditioned on a via-point
(Gaussian conditioning of the weights on q(t*) = q* with covariance Sigma*).

Why not a library: DFKI's ``movement_primitives`` (BSD-3) has both, but it imports pytransform3d
(which brings matplotlib and lxml) for its package to load, installs from source without its
compiled integrator (a Python loop per step: 90 ms per 3 s, 7-joint rollout here against 30 us),
and returns positions only. The main job (``episodic demo``) learns with DMPs, so they belong in
the lean core; tests/test_primitives.py checks these against their defining equations and a
numerical ODE solution.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np
from scipy.linalg import expm


@dataclass(frozen=True)
class JointTrajectory:
    """Samples every ``dt`` s: t (n,) s from 0, q (n, n_dofs) rad, qd rad/s, qdd rad/s^2."""

    t: np.ndarray
    q: np.ndarray
    qd: np.ndarray
    qdd: np.ndarray

    def __len__(self) -> int:
        return len(self.t)

    def place(self, joints, posture: np.ndarray) -> JointTrajectory:
        """This trajectory of some joints as one of all joints: joint ``joints[k]`` follows column
        k, the others hold ``posture`` (n_all,) rad at rest."""
        n = len(self.t)
        q = np.tile(np.asarray(posture, float), (n, 1))
        qd, qdd = np.zeros_like(q), np.zeros_like(q)
        q[:, joints], qd[:, joints], qdd[:, joints] = self.q, self.qd, self.qdd
        return JointTrajectory(self.t, q, qd, qdd)

    def episode(self, episode_id: int, segments: int = 1, wait: float = 0.0, context=None,
                rate: float | None = None) -> list:
        """One episode's commands: a start at q[0] (``context`` for the task), then the samples
        after it (t = dt ...) as ``segments`` trajectory segments of about equal length, the last
        holding its final posture ``wait`` s; ``rate`` Hz the samples' (None: the control rate)."""
        from episodic.interface.commands import StartCommand, TrajectoryCommand

        ctx = np.zeros(0) if context is None else np.asarray(context, float).ravel()
        commands: list = [StartCommand(episode_id, segments, posture=self.q[0], context=ctx)]
        for k, rows in enumerate(np.array_split(np.arange(1, len(self.t)), segments), start=1):
            commands.append(TrajectoryCommand(episode_id, k, segments, self.q[rows], self.qd[rows], self.qdd[rows],
                                              rate=rate, wait_time=wait if k == segments else 0.0))
        return commands


def samples(duration: float, dt: float) -> np.ndarray:
    """Sample times (n,) s: 0, dt, ..., up to ``duration`` (rounded to whole steps)."""
    if not (np.isfinite(duration) and duration > 0 and np.isfinite(dt) and dt > 0):
        raise ValueError(f"duration and dt must be positive s, got {duration} and {dt}")
    return np.arange(int(round(duration / dt)) + 1) * dt


# -- DMP ------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class _Responses:
    """A DMP's rollout per unit input at n samples: ``start`` (n, 3) the responses (q, qd, qdd)
    to q(0) = 1, ``velocity`` (n, 3) to qd(0) = 1 rad/s, ``goal`` (n, 3) to g = 1, ``weights``
    (3, n, n_weights) to each weight = 1."""

    start: np.ndarray
    velocity: np.ndarray
    goal: np.ndarray
    weights: np.ndarray


@dataclass(frozen=True)
class DMP:
    """A discrete DMP per joint (see the module docstring): ``duration`` tau s, ``n_weights``
    basis functions per joint. Parameters of a motion: weights (n_weights, n_dofs) rad, start
    q0 (n_dofs,) rad (and velocity qd0 rad/s), goal g (n_dofs,) rad."""

    duration: float
    n_weights: int = 10
    alpha_y: float = 25.0
    beta_y: float = 6.25
    alpha_x: float = float(np.log(100.0))
    overlap: float = 1.0

    def __post_init__(self) -> None:
        if not (np.isfinite(self.duration) and self.duration > 0):
            raise ValueError(f"a DMP's duration must be a positive number of s, got {self.duration}")
        if self.n_weights < 2:
            raise ValueError(f"a DMP needs at least 2 weights per joint, got {self.n_weights}")

    def with_duration(self, duration: float) -> DMP:
        """The same primitive played in ``duration`` s (same weights: the motion scaled in time)."""
        return DMP(duration, self.n_weights, self.alpha_y, self.beta_y, self.alpha_x, self.overlap)

    # phase and forcing basis
    def phase(self, t: np.ndarray) -> np.ndarray:
        """x(t) = exp(-alpha_x t / tau), t s."""
        return np.exp(-self.alpha_x * np.asarray(t, float) / self.duration)

    @property
    def centres(self) -> np.ndarray:
        """c_i (n_weights,): the phase at n_weights times evenly spaced over [0, tau]."""
        return self.phase(np.linspace(0.0, self.duration, self.n_weights))

    @property
    def widths(self) -> np.ndarray:
        """h_i (n_weights,): 1 / (overlap (c_{i+1} - c_i))^2, the last repeating the one before."""
        gaps = -np.diff(self.centres)
        gaps = np.append(gaps, gaps[-1])
        return 1.0 / (self.overlap * gaps) ** 2

    def basis(self, t: np.ndarray) -> np.ndarray:
        """The forcing basis at times t (n,) s: (n, n_weights) x psi_i(x) / sum_j psi_j(x), so
        f(t) = basis(t) @ w."""
        x = self.phase(t)[:, None]
        psi = np.exp(-self.widths * (x - self.centres) ** 2)
        return x * psi / psi.sum(axis=1, keepdims=True)

    def forcing(self, t: np.ndarray, weights: np.ndarray) -> np.ndarray:
        """f (n, n_dofs) rad at times t (n,) s for weights (n_weights, n_dofs) rad."""
        return self.basis(t) @ np.asarray(weights, float)

    def acceleration(self, t, q, qd, goal, weights) -> np.ndarray:
        """The transformation system: qdd (n, n_dofs) rad/s^2 at times t (n,) s, positions q and
        velocities qd (n, n_dofs), goal (n_dofs,) rad, weights (n_weights, n_dofs)."""
        tau = self.duration
        return (self.alpha_y * (self.beta_y * (np.asarray(goal, float) - q) - tau * qd)
                + self.forcing(t, weights)) / tau**2

    # rollout
    def rollout(self, weights: np.ndarray, start: np.ndarray, goal: np.ndarray, dt: float,
                run_time: float | None = None, start_velocity: np.ndarray | None = None) -> JointTrajectory:
        """The motion every ``dt`` s from t = 0 to ``run_time`` (default the duration; longer runs
        settle at the goal): weights (n_weights, n_dofs) rad, start and goal (n_dofs,) rad,
        start_velocity (n_dofs,) rad/s (default 0)."""
        weights = np.asarray(weights, float)
        start, goal = np.asarray(start, float), np.asarray(goal, float)
        if weights.ndim != 2 or weights.shape[0] != self.n_weights or start.shape != (weights.shape[1],) \
                or goal.shape != start.shape:
            raise ValueError(f"weights must be (n_weights={self.n_weights}, n_dofs) with start and goal "
                             f"(n_dofs,); got {weights.shape}, {start.shape}, {goal.shape}")
        t = samples(self.duration if run_time is None else run_time, dt)
        r = _responses(self, float(dt), len(t))
        qd0 = np.zeros_like(start) if start_velocity is None else np.asarray(start_velocity, float)
        out = (r.start[:, :, None] * start + r.velocity[:, :, None] * qd0 + r.goal[:, :, None] * goal
               + np.einsum("kns,sd->nkd", r.weights, weights))  # (n, 3, n_dofs): q, qd, qdd
        return JointTrajectory(t, out[:, 0], out[:, 1], out[:, 2])

    # imitation
    def imitate(self, t: np.ndarray, q: np.ndarray, qd: np.ndarray | None = None, qdd: np.ndarray | None = None,
                goal: np.ndarray | None = None, regularization: float = 1e-10) -> np.ndarray:
        """Weights (n_weights, n_dofs) rad that reproduce a demonstration q (n, n_dofs) rad at
        times t (n,) s from 0 (qd, qdd: its derivatives, by numpy.gradient when not given):
        least squares of the forcing term the demonstration needs, f = tau^2 qdd - alpha_y
        (beta_y (g - q) - tau qd), g = ``goal`` (n_dofs,) rad (default q[-1]), on the basis (ridge
        ``regularization``). The DMP should have the demonstration's duration; roll it out from
        q[0] to the same goal."""
        t, q = np.asarray(t, float), np.asarray(q, float)
        if q.ndim != 2 or t.shape != (len(q),) or len(q) < 3:
            raise ValueError(f"a demonstration is t (n,) s and q (n, n_dofs) rad with n >= 3; got {t.shape}, {q.shape}")
        qd = np.gradient(q, t, axis=0) if qd is None else np.asarray(qd, float)
        qdd = np.gradient(qd, t, axis=0) if qdd is None else np.asarray(qdd, float)
        tau = self.duration
        goal = q[-1] if goal is None else np.asarray(goal, float)
        target = tau**2 * qdd - self.alpha_y * (self.beta_y * (goal - q) - tau * qd)
        phi = self.basis(t)
        gram = phi.T @ phi + regularization * np.eye(self.n_weights)
        return np.linalg.solve(gram, phi.T @ target)


@dataclass(frozen=True)
class DMPPolicy:
    """A learner's parameters as a DMP motion of some joints, the others holding the start
    posture: theta (n_weights * n_joints,) is the weight matrix (n_weights, n_joints) row by row,
    each weight multiplied by the largest joint displacement (rad) a unit of it causes, so theta
    is in rad of displacement and one exploration noise fits every kernel (a unit weight of a late
    kernel moves a joint a hundred times less than one of the first: the phase x has decayed).

    ``posture`` (n_dofs,) rad the start of all joints, ``goal`` (n_joints,) rad, ``joints`` the
    learned joints' indices, ``dt`` s the control step."""

    dmp: DMP
    posture: np.ndarray
    goal: np.ndarray
    joints: tuple[int, ...]
    dt: float

    @classmethod
    def imitate(cls, t: np.ndarray, q: np.ndarray, joints, n_weights: int = 10, dt: float | None = None,
                qd: np.ndarray | None = None, qdd: np.ndarray | None = None) -> tuple[DMPPolicy, np.ndarray]:
        """The policy of a demonstration q (n, n_dofs) rad at times t (n,) s from 0 (its duration
        the DMP's, its start and end the start posture and goal) and the theta that imitates it."""
        q = np.asarray(q, float)
        joints = tuple(int(j) for j in joints)
        dmp = DMP(float(t[-1]), n_weights)

        def pick(a: np.ndarray | None) -> np.ndarray | None:
            """The learned joints' columns of a (n, n_dofs), or None."""
            return None if a is None else np.asarray(a, float)[:, joints]

        weights = dmp.imitate(t, q[:, joints], pick(qd), pick(qdd))
        policy = cls(dmp, q[0].copy(), q[-1, joints].copy(), joints, float(dt if dt is not None else t[1] - t[0]))
        return policy, policy.theta(weights)

    @property
    def scale(self) -> np.ndarray:
        """rad (n_weights,): the largest joint displacement a unit weight of each kernel causes."""
        n = len(samples(self.dmp.duration, self.dt))
        return np.abs(_responses(self.dmp, self.dt, n).weights[0]).max(axis=0)

    def theta(self, weights: np.ndarray) -> np.ndarray:
        """The parameters (n_weights * n_joints,) of weights (n_weights, n_joints)."""
        return (np.asarray(weights, float) * self.scale[:, None]).ravel()

    def weights(self, theta: np.ndarray) -> np.ndarray:
        """The weights (n_weights, n_joints) of parameters theta."""
        return np.asarray(theta, float).reshape(self.dmp.n_weights, len(self.joints)) / self.scale[:, None]

    def trajectory(self, theta: np.ndarray) -> JointTrajectory:
        """The motion of all joints for parameters theta, from the start posture over the duration."""
        start = self.posture[list(self.joints)]
        return self.dmp.rollout(self.weights(theta), start, self.goal, self.dt).place(list(self.joints), self.posture)


@lru_cache(maxsize=32)
def _responses(dmp: DMP, dt: float, n: int) -> _Responses:
    """Exact sampled responses of ``dmp``'s transformation system (first-order hold of the input
    between samples) to a unit start, start velocity, goal and each weight (see _Responses)."""
    tau, a, b = dmp.duration, dmp.alpha_y, dmp.beta_y
    system = np.array([[0.0, 1.0], [-a * b / tau**2, -a / tau]])   # d/dt [q, qd] = system [q, qd] + [0, u]
    m = np.zeros((4, 4))
    m[:2, :2], m[1, 2], m[2, 3] = system, 1.0, 1.0                  # augmented with u and its slope
    e = expm(m * dt)
    hold, gain, slope = e[:2, :2], e[:2, 2], e[:2, 3] / dt
    t = np.arange(n) * dt
    # inputs u (n, k), k = [start, velocity, goal, weights...]: qdd = -a b/tau^2 q - a/tau qd + u
    u = np.zeros((n, 3 + dmp.n_weights))
    u[:, 2] = a * b / tau**2
    u[:, 3:] = dmp.basis(t) / tau**2
    s = np.zeros((n, 2, u.shape[1]))
    s[0, 0, 0], s[0, 1, 1] = 1.0, 1.0
    for k in range(n - 1):
        s[k + 1] = hold @ s[k] + np.outer(gain - slope, u[k]) + np.outer(slope, u[k + 1])
    qdd = system[1] @ s + u                                          # (n, k): the system at each sample
    out = np.concatenate([s, qdd[:, None, :]], axis=1)              # (n, 3, k): q, qd, qdd
    out.setflags(write=False)
    return _Responses(out[:, :, 0], out[:, :, 1], out[:, :, 2], out[:, :, 3:].transpose(1, 0, 2))


# -- ProMP ----------------------------------------------------------------------------------------
def promp_basis(z: np.ndarray, n_weights: int, width: float | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Normalised Gaussian basis on the phase z (n,) in [0, 1] and its first and second
    derivatives in z, each (n, n_weights): centres evenly over [0, 1] (a margin of one spacing
    each side helps the ends little and is left out), ``width`` the kernels' standard deviation
    in phase (default the spacing)."""
    z = np.asarray(z, float)[:, None]
    c = np.linspace(0.0, 1.0, n_weights)
    h = (c[1] - c[0]) if width is None else float(width)
    d = (z - c) / h
    psi = np.exp(-0.5 * d**2)
    dpsi = -d / h * psi
    ddpsi = (d**2 - 1.0) / h**2 * psi
    s, ds, dds = psi.sum(1, keepdims=True), dpsi.sum(1, keepdims=True), ddpsi.sum(1, keepdims=True)
    b = psi / s
    db = (dpsi - b * ds) / s
    ddb = (ddpsi - 2.0 * db * ds - b * dds) / s
    return b, db, ddb


@dataclass
class ProMP:
    """A weight distribution over trajectories of ``n_dofs`` joints: q_j(t) = Phi(t / duration) @
    w_j, the weight vector w = [w_1, ..., w_n_dofs] ((n_dofs n_weights,), joint by joint) ~ N(mean,
    cov). ``duration`` s the demonstrations' (common) length in time; ``width`` see promp_basis."""

    n_dofs: int
    n_weights: int
    duration: float
    mean: np.ndarray
    cov: np.ndarray
    width: float | None = None
    noise: float = field(default=1e-8)  # rad^2, variance added to q(t) when conditioning and sampling

    @classmethod
    def from_demonstrations(cls, demonstrations: list[tuple[np.ndarray, np.ndarray]], n_weights: int = 10,
                            regularization: float = 1e-8, width: float | None = None) -> ProMP:
        """Fit to demonstrations [(t (n_k,) s from 0, q (n_k, n_dofs) rad), ...] of about one
        duration (each is mapped onto phase [0, 1] by its own end time; duration: their mean):
        ridge-regressed weights per demonstration, then the weights' mean and covariance (at least
        two demonstrations; a small ridge keeps the covariance positive definite)."""
        if len(demonstrations) < 2:
            raise ValueError("a ProMP needs at least two demonstrations for a covariance")
        n_dofs = np.asarray(demonstrations[0][1]).shape[1]
        rows = []
        for t, q in demonstrations:
            t, q = np.asarray(t, float), np.asarray(q, float)
            if q.ndim != 2 or q.shape[1] != n_dofs or t.shape != (len(q),):
                raise ValueError(f"every demonstration needs t (n,) and q (n, {n_dofs}); got {t.shape}, {q.shape}")
            phi = promp_basis(t / t[-1], n_weights, width)[0]
            w = np.linalg.solve(phi.T @ phi + regularization * np.eye(n_weights), phi.T @ q)  # (n_weights, n_dofs)
            rows.append(w.T.ravel())
        ws = np.array(rows)
        cov = np.cov(ws, rowvar=False) + regularization * np.eye(ws.shape[1])
        duration = float(np.mean([np.asarray(t, float)[-1] for t, _ in demonstrations]))
        return cls(n_dofs, n_weights, duration, ws.mean(axis=0), cov, width)

    def _features(self, t: np.ndarray, order: int = 0) -> np.ndarray:
        """Phi (n, n_weights) of the order-th time derivative at times t (n,) s."""
        phi = promp_basis(np.asarray(t, float) / self.duration, self.n_weights, self.width)[order]
        return phi / self.duration**order

    def trajectory(self, weights: np.ndarray, dt: float) -> JointTrajectory:
        """The trajectory of one weight vector (n_dofs n_weights,) every dt s over the duration."""
        t = samples(self.duration, dt)
        w = np.asarray(weights, float).reshape(self.n_dofs, self.n_weights).T
        q, qd, qdd = (self._features(t, k) @ w for k in range(3))
        return JointTrajectory(t, q, qd, qdd)

    def mean_trajectory(self, dt: float) -> JointTrajectory:
        return self.trajectory(self.mean, dt)

    def std(self, t: np.ndarray) -> np.ndarray:
        """Standard deviation (n, n_dofs) rad of q at times t (n,) s."""
        phi = self._features(t)
        cov = self.cov.reshape(self.n_dofs, self.n_weights, self.n_dofs, self.n_weights)
        var = np.einsum("ni,jijk,nk->nj", phi, cov, phi)
        return np.sqrt(np.maximum(var, 0.0))

    def sample(self, n: int, rng: np.random.Generator) -> np.ndarray:
        """n weight vectors (n, n_dofs n_weights) drawn from N(mean, cov)."""
        return rng.multivariate_normal(self.mean, self.cov, size=n, method="cholesky")

    def condition(self, t: float, q: np.ndarray, cov: np.ndarray | float = 0.0) -> ProMP:
        """The ProMP given that q(t) = q (n_dofs,) rad at time t s, with observation covariance
        ``cov`` (n_dofs, n_dofs) rad^2 or a variance (0: exact up to ``noise``):
        mean' = mean + K (q - H mean), cov' = cov - K H cov, K = cov H^T (S + H cov H^T)^-1,
        H (n_dofs, n_dofs n_weights) the block-diagonal basis row at t."""
        q = np.asarray(q, float).reshape(self.n_dofs)
        h = np.kron(np.eye(self.n_dofs), self._features(np.array([t]))[0])
        s = np.broadcast_to(np.asarray(cov, float), (self.n_dofs, self.n_dofs)) if np.ndim(cov) == 2 \
            else float(cov) * np.eye(self.n_dofs)
        innovation = s + self.noise * np.eye(self.n_dofs) + h @ self.cov @ h.T
        gain = np.linalg.solve(innovation, h @ self.cov).T
        mean = self.mean + gain @ (q - h @ self.mean)
        cov_new = self.cov - gain @ h @ self.cov
        return ProMP(self.n_dofs, self.n_weights, self.duration, mean, 0.5 * (cov_new + cov_new.T), self.width,
                     self.noise)
