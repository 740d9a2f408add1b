"""A Gymnasium face: one ``step`` is one whole episode (a black-box environment in the style of
fancy_gym's black-box wrapper), for episodic policy search (CMA-ES, PoWER, REPS, ...) through any
library that speaks Gymnasium. Needs the optional extra ``episodic[gym]`` (gymnasium >= 1.0).

    from episodic.learning.gym_env import BlackBoxEnv

    env = BlackBoxEnv("reach", contexts=([-0.2, 0.3, 1.3], [0.2, 0.6, 1.7]))
    context, info = env.reset(seed=0)
    context, episode_return, terminated, truncated, info = env.step(env.action_space.sample())

The motion: one of three parametrisations (``primitive``), each on the chosen ``joints``
(default: every robot joint the task does not leave passive; the others hold the start posture),
from the start posture at rest, over ``duration`` s, sampled at the control rate (t = dt ..
duration) with its velocities and accelerations and sent as the episode's one trajectory
segment, whose last posture is then held ``hold`` s.

- ``"via"`` (default): ``n_via`` via-points, each an offset of at most ``scale`` rad from the
  start posture: action (n_via * n_joints,) in [-1, 1] (values outside are clipped), via-point k
  joint j at ``action[k * n_joints + j] * scale``, reached at t = k * duration / n_via s, k =
  1..n_via; a cubic spline through the start posture (t = 0) and them, at rest at both ends.
- ``"dmp"``: one discrete DMP per joint (episodic.learning.primitives.DMP, ``n_weights`` basis
  functions): action = [weights (n_weights, n_joints) row by row, in rad of joint displacement as
  ``DMPPolicy.theta`` scales them; goal (n_joints,) rad, offsets of the goal from the start
  posture], each within [-scale, scale] rad. The DMP runs from the start posture at rest towards
  the goal for ``duration`` s.
- ``"promp"``: a ProMP's mean motion per joint (episodic.learning.primitives.promp_basis,
  ``n_weights`` normalised Gaussians over the phase z = t / duration): action = weights
  (n_weights, n_joints) row by row, rad, within [-scale, scale]; joint j's offset from the start
  posture is s(z) Phi(z) w_j with s(z) = z^2 (3 - 2 z), which starts it at rest at the start
  posture (Phi(z) w_j itself, a ProMP's trajectory, need not) and leaves the rest of the motion
  the ProMP's; it ends with the ProMP's own velocity (a throw's follow-through), and the hold
  then holds its last posture.

``durations=(low, high)`` s makes the duration part of the action as well, its last entry, within
those bounds (a ProMP's or DMP's tau, as fancy_gym's ``learn_tau``; the via-points' times scale
with it); by default it is the fixed ``duration``. ``action_layout`` names each part's slice of
the action and ``parameters(action)`` returns them (clipped) by name: weights, goal, duration or
via-points.

The episode. ``step`` sends a start command (index 0, the task's start posture, the context),
then that segment; the reward is the episode's return as the runner reckons it (the sum of its
step rewards and, for an episode that ended early, e.g. a joint over its velocity limit:
SAFETY_ABORT, the runner's charge for what it left out, so that stopping a motion early cannot
pay; plus ``penalty``, 0 by default, when the episode ended with a flag other than OK);
``terminated`` is always True, ``truncated`` False; ``info`` holds ``flag`` (its name),
``success`` (the task's verdict on the final state), ``steps`` (control steps of the motion and
the hold) and ``message``. A start the runner refuses (a context the task does not take) raises
:class:`EnvError`. ``step`` may be called again without ``reset``: it runs another episode in the same context.

The observation is the context (float64, the task's longest context size; a task without
context gives an empty observation). ``reset(seed=...)`` draws it, deterministically from the
seed, from ``contexts``: (low, high) arrays, uniform in that box, which is then the observation
space; or a function ``contexts(rng) -> context`` of a numpy Generator; or, when None, from the
task's own ``sample_context(rng)`` if it defines one, else it is the task's fixed default
context. ``reset(options={"context": c})`` sets it instead. The observation space is unbounded
unless ``contexts`` is a box.

Where it runs. ``sender`` is a task's name or ``module:Class`` spec: an in-process runner of it
(default parameters; on ``robot``) that keeps no episodes and writes no log, as a black box
needs only each episode's return, made and closed by the environment; or any
:class:`episodic.interface.sender.Sender`: an in-process
:class:`episodic.runtime.runner.Runner` (the task and robot are taken from it; one that keeps its
episodes, a Runner's default without a log, holds every episode a learner runs) or an
``episodic.bridge.Client`` on a served channel (pass ``task``, the same Task object the runner
serves, with the same parameters, or the name or ``module:Class`` spec it was served with, which
``episodic.tasks.make_task`` resolves as ``episodic serve --task`` does, and ``robot`` when not
the WAM); or a function that returns
one, called once here, whose Sender ``close`` then closes. Determinism: in blocking mode every
episode starts from the exact start state (episodic.runtime.machine), so the same seed and action give
the same reward and observation whatever ran before, in-process and over the bridge alike
(``gymnasium.utils.env_checker.check_env`` checks it). In realtime mode (or on a robot) they
do not.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import gymnasium
import numpy as np
from gymnasium import spaces
from numpy.typing import ArrayLike
from scipy.interpolate import CubicSpline

from episodic.interface.robot import Robot, load_robot
from episodic.interface.sender import Sender
from episodic.interface.vocabulary import Flag
from episodic.learning.primitives import DMP, DMPPolicy, promp_basis
from episodic.task import Task

Contexts = tuple[ArrayLike, ArrayLike] | Callable[[np.random.Generator], ArrayLike] | None


def _runner(task: str, robot: Robot | str | None) -> Sender:
    """An in-process blocking runner of ``task`` (a name or spec, default parameters) on ``robot``
    (None: the task's first robot, or the WAM) that keeps no episodes and writes no log."""
    from episodic.runtime.runner import Runner
    from episodic.tasks import make_task

    made = make_task(task)
    tied = made.needs.robots
    return Runner(made, robot or (tied[0] if tied else "wam"), keep_episodes=False)


class EnvError(RuntimeError):
    """The runner refused an episode's start (e.g. a context the task does not take), or stopped."""


PRIMITIVES = ("via", "dmp", "promp")  # the motion's parametrisations (module docstring)


class BlackBoxEnv(gymnasium.Env):
    """One step = one episode of ``task``: action = the motion's parameters (via-point offsets,
    a DMP's or a ProMP's; module docstring), observation = the context, reward = the episode's
    return, terminated after every step.

    ``sender``: a task's name or spec (an in-process runner of it, without kept episodes or a
    log), a Runner, a bridge Client, or a function returning one; ``task``: the Task the
    runner serves, or its name or ``module:Class`` spec (default parameters; taken from a Runner
    when None); ``robot``: a Robot or its name (a Runner's, or
    the task's first robot, or "wam", when None); ``primitive``: "via", "dmp" or "promp";
    ``n_via``: via-points per episode; ``n_weights``: a DMP's or ProMP's basis functions per
    joint; ``duration`` s of the motion (from the start to the last via-point); ``durations``:
    (low, high) s, the duration then the action's last entry; ``hold`` s the last posture is
    held; ``scale`` rad: the largest offset of a via-point from the start posture, and the bound
    of a DMP's or ProMP's weights and goal; ``joints``: the joints moved (names or 0-based
    indices); ``contexts``: how reset draws the context; ``penalty``: added to the reward of an
    episode that ended with a flag other than OK, on top of the runner's charge.
    """

    metadata = {"render_modes": []}

    def __init__(self, sender: str | Sender | Callable[[], Sender], task: Task | str | None = None, *,
                 robot: Robot | str | None = None, primitive: str = "via", n_via: int = 3, n_weights: int = 5,
                 duration: float = 2.0, durations: tuple[float, float] | None = None, hold: float = 0.5,
                 scale: float = 0.3, joints: Sequence[str | int] | None = None, contexts: Contexts = None,
                 penalty: float = 0.0):
        self._owned = not isinstance(sender, Sender)
        made = sender if isinstance(sender, Sender) else _runner(sender, robot) if isinstance(sender, str) else sender()
        if not isinstance(made, Sender):
            raise TypeError(f"BlackBoxEnv takes a Sender (a Runner or a bridge Client) or a function returning "
                            f"one, got {made!r}")
        self.sender: Sender = made
        try:
            if isinstance(task, str):
                from episodic.tasks import make_task

                task = make_task(task)
            served = task if task is not None else getattr(made, "task", None)
            if not isinstance(served, Task):
                raise TypeError("over the bridge, pass the served task: BlackBoxEnv(client, make_task(name, params))")
            self.task: Task = served
            if tuple(self.sender.state_names) != tuple(self.task.columns):
                raise ValueError(f"the runner's task state columns {list(self.sender.state_names)} are not task "
                                 f"'{self.task.name}''s {list(self.task.columns)}: pass the task it serves")
            if robot is None:
                tied = self.task.needs.robots
                robot = getattr(self.sender, "robot", None) or (tied[0] if tied else "wam")
            self.robot = load_robot(robot) if isinstance(robot, str) else robot
            if self.robot.n_dofs != self.sender.n_dofs:
                raise ValueError(f"the runner drives {self.sender.n_dofs} joints, robot '{self.robot.name}' has "
                                 f"{self.robot.n_dofs}: pass the robot it serves")
            self.joints = self._joint_indices(joints)
            if primitive not in PRIMITIVES:
                raise ValueError(f"primitive must be one of {PRIMITIVES}, got {primitive!r}")
            for name, count, least in (("n_via", n_via, 1), ("n_weights", n_weights, 2)):
                if not (isinstance(count, int) and count >= least):
                    raise ValueError(f"{name} must be a whole number >= {least}, got {count!r}")
            if not (duration > 0 and hold >= 0 and scale > 0):
                raise ValueError(f"duration and scale must be > 0 and hold >= 0, got {duration}, {scale}, {hold}")
            self.primitive, self.n_via, self.n_weights = primitive, n_via, n_weights
            self.duration, self.hold, self.scale = float(duration), float(hold), float(scale)
            self.durations = None if durations is None else (float(durations[0]), float(durations[1]))
            self.penalty = float(penalty)
            shortest = self.duration if self.durations is None else self.durations[0]
            if self.durations is not None and not 0 < self.durations[0] <= self.durations[1] < np.inf:
                raise ValueError(f"durations must be (low, high) s with 0 < low <= high, got {durations}")
            if self._motion_steps(shortest) < (n_via if primitive == "via" else 2):
                raise ValueError(f"{shortest} s is under one control step per via-point, or a primitive's two")
            box, self.action_layout = self._action_space()
            self.action_space, self._bounds = box, (box.low, box.high)
            self._default = np.asarray(self.task.default_context(), float).ravel()
            self._sample = self._sampler(contexts)
        except Exception:
            self.close()
            raise
        self._context = self._default.copy()

    # -- set-up ----------------------------------------------------------------
    def _action_space(self) -> tuple[spaces.Box, dict[str, slice]]:
        """The Box of actions and each part's slice of it (module docstring)."""
        n_j = len(self.joints)
        if self.primitive == "via":
            parts = {"via_points": (self.n_via * n_j, 1.0)}
        else:
            parts = {"weights": (self.n_weights * n_j, self.scale)}
            if self.primitive == "dmp":
                parts["goal"] = (n_j, self.scale)
        layout, low, high, at = {}, [], [], 0
        for name, (size, bound) in parts.items():
            layout[name] = slice(at, at + size)
            low.append(np.full(size, -bound))
            high.append(np.full(size, bound))
            at += size
        if self.durations is not None:
            layout["duration"] = slice(at, at + 1)
            low.append(np.array([self.durations[0]]))
            high.append(np.array([self.durations[1]]))
        return spaces.Box(np.concatenate(low), np.concatenate(high), dtype=np.float64), layout

    def _motion_steps(self, duration: float) -> int:
        """Control steps of a motion of ``duration`` s."""
        return int(round(duration * self.robot.control_rate))

    def _joint_indices(self, joints: Sequence[str | int] | None) -> np.ndarray:
        names = list(self.robot.joint_names)
        if joints is None:
            return np.array([i for i, name in enumerate(names) if name not in self.task.passive_joints])
        out = []
        for joint in joints:
            if isinstance(joint, str) and joint in names:
                out.append(names.index(joint))
            elif isinstance(joint, (int, np.integer)) and not isinstance(joint, bool) and 0 <= joint < len(names):
                out.append(int(joint))
            else:
                raise ValueError(f"joint {joint!r} is not one of {names} (or an index 0..{len(names) - 1})")
        if not out or len(set(out)) != len(out):
            raise ValueError(f"joints must name distinct joints, at least one, got {list(joints)}")
        return np.array(out)

    def _sampler(self, contexts: Contexts) -> Callable[[np.random.Generator], ArrayLike] | None:
        """How reset draws a context (None: the fixed default), and the observation space."""
        n = self._default.size
        if contexts is None:
            contexts = getattr(self.task, "sample_context", None)
        if contexts is None or callable(contexts):
            self.observation_space = spaces.Box(-np.inf, np.inf, (n,), np.float64)
            return contexts
        low, high = (np.asarray(bound, float).ravel() for bound in contexts)
        if low.shape != (n,) or high.shape != (n,) or not np.all(low <= high) or not np.all(np.isfinite([low, high])):
            raise ValueError(f"contexts (low, high) must be {n} finite values each, low <= high, for task "
                             f"'{self.task.name}' ({self.task.context_help}); got {low.tolist()}, {high.tolist()}")
        self.observation_space = spaces.Box(low, high, (n,), np.float64)
        return lambda rng: rng.uniform(low, high)

    # -- the Gymnasium API -------------------------------------------------------
    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[np.ndarray, dict]:
        """Draw the next context (the observation); ``options={"context": c}`` sets it."""
        super().reset(seed=seed)
        if options and "context" in options:
            context = options["context"]
        elif self._sample is not None:
            context = self._sample(self.np_random)
        else:
            context = self._default
        context = np.array(context, dtype=np.float64).ravel()
        if context.shape != self._default.shape:
            raise ValueError(f"a context of task '{self.task.name}' here has {self._default.size} values "
                             f"({self.task.context_help}), got {context.size}")
        self._context = context
        return self._context.copy(), {}

    def step(self, action: ArrayLike) -> tuple[np.ndarray, float, bool, bool, dict]:
        """Run one episode of the motion ``action`` in the current context."""
        start = self.sender.start_episode(1, context=self._context)
        if start.flag != Flag.OK:
            raise EnvError(f"the runner refused the episode's start ({Flag(start.flag).name}): {start.message}")
        assert start.posture is not None  # an accepted start's reply holds the start posture reached
        q, qd, qdd = self.trajectory(action, start.posture)
        reply = self.sender.send_trajectory(q, qd=qd, qdd=qdd, wait_time=self.hold)
        flag = Flag(reply.flag)
        success = bool(flag == Flag.OK and reply.episode_done and self.task.success(np.asarray(reply.state)))
        reward = float(start.reward) + float(reply.reward) + (self.penalty if flag != Flag.OK else 0.0)
        info = {"flag": flag.name, "success": success, "steps": int(reply.n_steps), "message": reply.message}
        return self._context.copy(), reward, True, False, info

    def close(self) -> None:
        """Close the Sender if this environment made it (a Runner or Client passed in is the caller's)."""
        sender = getattr(self, "sender", None)
        if self._owned and sender is not None and hasattr(sender, "close"):
            sender.close()
            self._owned = False  # closed: closing again does nothing

    # -- the motion ----------------------------------------------------------------
    def parameters(self, action: ArrayLike) -> dict[str, Any]:
        """The parts of ``action`` by name, clipped to the action space: ``via_points`` (n_via,
        n_joints) rad offsets, or ``weights`` (n_weights, n_joints) and for a DMP ``goal``
        (n_joints,) rad offsets; ``duration`` s."""
        low, high = self._bounds
        a = np.asarray(action, float).ravel()
        if a.shape != low.shape:
            raise ValueError(f"an action here has {low.size} values ({', '.join(self.action_layout)}), got {a.size}")
        a = np.clip(a, low, high)
        n_j, parts = len(self.joints), self.action_layout
        out: dict[str, Any] = {"duration": float(a[parts["duration"]][0]) if "duration" in parts else self.duration}
        if self.primitive == "via":
            out["via_points"] = a[parts["via_points"]].reshape(self.n_via, n_j) * self.scale
        else:
            out["weights"] = a[parts["weights"]].reshape(self.n_weights, n_j)
        if "goal" in parts:
            out["goal"] = a[parts["goal"]]
        return out

    def trajectory(self, action: ArrayLike, posture: ArrayLike) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """q, qd, qdd (n, n_dofs) rad, rad/s, rad/s^2 at the control rate (t = dt .. duration) of
        ``action`` from the start ``posture`` (n_dofs,) rad (module docstring)."""
        p = self.parameters(action)
        posture = np.asarray(posture, float)
        start, duration, dt = posture[self.joints], p["duration"], self.robot.control_dt
        n = self._motion_steps(duration)
        if self.primitive == "dmp":
            policy = DMPPolicy(DMP(n * dt, self.n_weights), posture, start + p["goal"], tuple(self.joints), dt)
            motion = policy.trajectory(p["weights"].ravel())
            return motion.q[1:], motion.qd[1:], motion.qdd[1:]
        t = np.arange(1, n + 1) * dt
        if self.primitive == "via":
            knots = np.vstack([start, start + p["via_points"]])
            spline = CubicSpline(np.arange(self.n_via + 1) * (duration / self.n_via), knots, bc_type="clamped", axis=0)
            moved = spline(t), spline(t, 1), spline(t, 2)
        else:
            moved = self._promp(t / (n * dt), n * dt, start, p["weights"])
        q = np.tile(posture, (n, 1))
        qd, qdd = np.zeros_like(q), np.zeros_like(q)
        q[:, self.joints], qd[:, self.joints], qdd[:, self.joints] = moved
        return q, qd, qdd

    def _promp(self, z: np.ndarray, duration: float, start: np.ndarray,
               weights: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """q, qd, qdd (n, n_joints) of the chosen joints at phases z (n,): start + s(z) Phi(z) w
        (module docstring), ``duration`` s, ``weights`` (n_weights, n_joints) rad."""
        basis = promp_basis(z, self.n_weights)
        d, dd, ddd = (b @ weights for b in basis)  # the ProMP's offsets and their derivatives in z
        z = z[:, None]
        s, ds, dds = z**2 * (3 - 2 * z), 6 * z * (1 - z), 6 - 12 * z
        return (start + s * d, (ds * d + s * dd) / duration,
                (dds * d + 2 * ds * dd + s * ddd) / duration**2)
