"""Commands a learner sends, in their in-process form (what the shared-memory bridge carries).

Every command has an episode id, an index (0 starts the episode, 1..max_commands are
segments) and max_commands. ``validate`` checks a command against the robot and the
configured size limits and raises :class:`CommandError` with a message saying what to fix.
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from episodic.interface.robot import Robot
from episodic.interface.vocabulary import CommandError, Feedforward, Kind


@dataclass(frozen=True)
class Limits:
    """Size limits a runner accepts (the bridge sizes its buffers from these).

    max_segment_steps: samples in one trajectory; max_context: entries of a context vector;
    max_commands: largest max_commands; max_wait_time s; max_rate Hz: fastest sample rate of a
    segment; max_magnitude: largest |value| of any array entry (rad, rad/s, rad/s^2, gains,
    context), far beyond anything physical, so that no finite input can overflow the
    resampling or the control law; max_batch_steps: most control steps the episodes of one
    batch may run together (a batch's episodes are held until it ends, about STEP_MEMORY bytes
    per step: 1,000,000 steps, 2,000 s on the WAM, hold about 0.8 GB); max_held_steps: most
    control steps a runner holds in memory when it cannot stream them to a log (no log, or it
    keeps its episodes): the running episode's and the kept episodes' together (the oldest kept
    ones are let go first; a command that could take the running episode past it is refused,
    episodic.runtime.runner), about 0.8 GB at 1,000,000.
    """

    max_segment_steps: int = 20_000
    max_context: int = 64
    max_commands: int = 1_000
    max_wait_time: float = 60.0
    max_rate: float = 1e6
    max_magnitude: float = 1e6
    max_batch_steps: int = 1_000_000
    max_held_steps: int = 1_000_000


# bytes of memory a held control step takes on the WAM (its log columns and the simulation
# state they view; benchmarks/memory.py --held-whole measures about 0.7 kB), for messages
STEP_MEMORY = 800


class BatchTooLarge(CommandError):
    """A batch whose episodes together could run more than the limits' max_batch_steps."""


def most_steps(commands: Sequence[Any], control_rate: float, limits: Limits) -> int:
    """The most control steps ``commands`` (as received, unchecked) can run at ``control_rate``
    Hz within ``limits``: each segment's samples resampled to the control rate, and each
    wait_time, clipped to the limits (a command the checks will refuse counts what it would run
    if accepted; one without a finite size counts 0)."""
    total = 0.0
    for cmd in commands:
        wait = getattr(cmd, "wait_time", 0.0)
        if isinstance(wait, (int, float)) and math.isfinite(wait):
            total += min(max(wait, 0.0), limits.max_wait_time) * control_rate
        q, rate = getattr(cmd, "q", None), getattr(cmd, "rate", None)
        if isinstance(q, np.ndarray) and q.ndim >= 1:
            rate = control_rate if rate is None else rate
            if isinstance(rate, (int, float)) and math.isfinite(rate) and rate > 0:
                total += min(q.shape[0] * control_rate / rate, limits.max_segment_steps) + 1
    return int(math.ceil(total))


@dataclass(frozen=True)
class Header:
    episode_id: int
    index: int
    max_commands: int


@dataclass(frozen=True)
class StartCommand:
    """Index 0: go to ``posture`` (n_dofs,) rad, or the task's default start when None,
    then reset the task from ``context`` (n_context,)."""

    episode_id: int
    max_commands: int
    posture: np.ndarray | None = None
    context: np.ndarray = field(default_factory=lambda: np.zeros(0))
    index: int = 0
    kind = Kind.START


@dataclass(frozen=True)
class TrajectoryCommand:
    """A segment: desired q (n_samples, n_dofs) rad at ``rate`` Hz, optional qd rad/s and
    qdd rad/s^2 of the same shape; after the last sample the final posture is held for
    ``wait_time`` s. ``rate`` None means the robot's control rate."""

    episode_id: int
    index: int
    max_commands: int
    q: np.ndarray
    qd: np.ndarray | None = None
    qdd: np.ndarray | None = None
    rate: float | None = None
    wait_time: float = 0.0
    kind = Kind.TRAJECTORY


@dataclass(frozen=True)
class GainsCommand:
    """A gain set for the following segments: kp N m/rad, kd N m s/rad, ki N m/(rad s),
    each (n_dofs,) (the integral of q_d - q starts at zero with each gain set), the feedforward
    mode, and optionally ``task_gains`` (n,) for the task's own feedback law (e.g. ball position
    and velocity to beam angle; see the task). The posture (with the task's feedback acting) is
    held for ``wait_time`` s."""

    episode_id: int
    index: int
    max_commands: int
    kp: np.ndarray
    kd: np.ndarray
    ki: np.ndarray | None = None
    feedforward: Feedforward = Feedforward.GRAVITY_COMPENSATION
    wait_time: float = 0.0
    task_gains: np.ndarray | None = None
    kind = Kind.GAINS


@dataclass(frozen=True)
class ResetCommand:
    """The learner aborts the current episode."""

    episode_id: int
    index: int = 0
    max_commands: int = 0
    kind = Kind.RESET


@dataclass(frozen=True)
class MalformedCommand:
    """What arrived could not be read as a command (e.g. an unknown kind on the wire);
    ``reason`` says why. Always refused with the invalid-payload flag."""

    episode_id: int
    index: int
    max_commands: int
    reason: str
    kind = Kind.MALFORMED


Command = StartCommand | TrajectoryCommand | GainsCommand | ResetCommand


def unchecked(value: Any) -> Any:
    """``value`` put into a command as it came (a learner's ArrayLike, a feedforward mode's name or
    number, a stored record's array or None where it could not be stored): :func:`validate`
    converts it to the field's type or refuses the command, so nothing is checked here."""
    return value


def _array(name: str, value, shape: tuple[int, ...] | None, ndim: int, limits: Limits) -> np.ndarray:
    try:
        arr = np.asarray(value)
        if arr.dtype.kind not in "biuf":
            raise TypeError(f"got {arr.dtype} values")
        arr = np.array(arr, dtype=float, order="C")  # a copy in C order, as the compiled loop reads it
    except (TypeError, ValueError) as exc:
        raise CommandError(f"{name} must be real numbers: {exc}") from None
    if arr.ndim != ndim:
        raise CommandError(f"{name} must have {ndim} dimension(s), got shape {arr.shape}")
    if shape is not None and arr.shape != shape:
        raise CommandError(f"{name} must have shape {shape}, got {arr.shape}")
    if not np.all(np.isfinite(arr)):
        raise CommandError(f"{name} contains NaN or inf; send finite values")
    if arr.size and np.max(np.abs(arr)) > limits.max_magnitude:
        raise CommandError(f"{name} has a value of magnitude {np.max(np.abs(arr)):.7g}; "
                           f"values must be at most {limits.max_magnitude:g} in magnitude")
    return arr


def _real(name: str, value) -> float:
    """A finite real scalar, or CommandError."""
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise CommandError(f"{name} must be a real number, got {value!r}")
    try:
        out = float(value)
    except OverflowError:
        raise CommandError(f"{name} is too large: {value!r}") from None
    if not np.isfinite(out):
        raise CommandError(f"{name} must be finite, got {value!r}")
    return out


def _wait(value: float, limits: Limits) -> float:
    wait = _real("wait_time", value)
    if wait < 0 or wait > limits.max_wait_time:
        raise CommandError(f"wait_time must be in [0, {limits.max_wait_time}] s, got {value}")
    return wait


def _header(cmd, limits: Limits) -> None:
    for name, top in (("episode_id", 2**63), ("index", 2**31), ("max_commands", 2**31)):
        value = getattr(cmd, name)
        if not isinstance(value, (int, np.integer)) or not 0 <= value < top:
            raise CommandError(f"{name} must be an integer in [0, {top}), got {value!r}")
    if cmd.kind != Kind.RESET and not 1 <= cmd.max_commands <= limits.max_commands:
        raise CommandError(f"max_commands must be in 1..{limits.max_commands}, got {cmd.max_commands}")


def validate(cmd, robot: Robot, limits: Limits) -> Command:
    """Return ``cmd`` with arrays as float64 and defaults filled in; raise CommandError."""
    if isinstance(cmd, MalformedCommand):
        raise CommandError(cmd.reason)
    if not isinstance(cmd, (StartCommand, TrajectoryCommand, GainsCommand, ResetCommand)):
        raise CommandError(f"unknown command kind {type(cmd).__name__}; send start, trajectory, gains or reset")
    _header(cmd, limits)
    n = robot.n_dofs
    if isinstance(cmd, StartCommand):
        if cmd.index != 0:
            raise CommandError("a start command has index 0")
        posture = None if cmd.posture is None else _array("posture", cmd.posture, (n,), 1, limits)
        if posture is not None and (np.any(posture < robot.range_lower) or np.any(posture > robot.range_upper)):
            raise CommandError(
                f"posture {np.round(posture, 4).tolist()} lies outside the joint range "
                f"[{robot.range_lower.tolist()}, {robot.range_upper.tolist()}] rad"
            )
        context = _array("context", cmd.context, None, 1, limits)
        if context.size > limits.max_context:
            raise CommandError(f"context has {context.size} entries; at most {limits.max_context}")
        return StartCommand(cmd.episode_id, cmd.max_commands, posture, context)
    if isinstance(cmd, ResetCommand):
        return cmd
    if cmd.index < 1:
        raise CommandError(f"a {cmd.kind.name.lower()} command needs index >= 1; index 0 is the start")
    wait = _wait(cmd.wait_time, limits)
    if isinstance(cmd, GainsCommand):
        kp = _array("kp", cmd.kp, (n,), 1, limits)
        kd = _array("kd", cmd.kd, (n,), 1, limits)
        ki = np.zeros(n) if cmd.ki is None else _array("ki", cmd.ki, (n,), 1, limits)
        for name, gain in (("kp", kp), ("kd", kd), ("ki", ki)):
            if np.any(gain < 0):
                raise CommandError(f"{name} must be non-negative, got {gain.tolist()}")
        mode = Feedforward.parse(cmd.feedforward)
        task_gains = None if cmd.task_gains is None else _array("task_gains", cmd.task_gains, None, 1, limits)
        if task_gains is not None and task_gains.size > limits.max_context:
            raise CommandError(f"task_gains has {task_gains.size} entries; at most {limits.max_context}")
        return GainsCommand(cmd.episode_id, cmd.index, cmd.max_commands, kp, kd, ki, mode, wait, task_gains)
    q = _array("q", cmd.q, None, 2, limits)
    if q.shape[1] != n:
        raise CommandError(f"q must be (n_samples, {n}) for this robot, got {q.shape}")
    if not 1 <= q.shape[0] <= limits.max_segment_steps:
        raise CommandError(f"q has {q.shape[0]} samples; send 1..{limits.max_segment_steps}")
    qd = None if cmd.qd is None else _array("qd", cmd.qd, q.shape, 2, limits)
    qdd = None if cmd.qdd is None else _array("qdd", cmd.qdd, q.shape, 2, limits)
    if qdd is not None and qd is None:
        raise CommandError("qdd given without qd; send qd too")
    rate = robot.control_rate if cmd.rate is None else _real("rate", cmd.rate)
    if not 0 < rate <= limits.max_rate:
        raise CommandError(f"rate must be a positive number of samples per second up to "
                           f"{limits.max_rate:g}, got {cmd.rate}")
    if q.shape[0] / rate * robot.control_rate > limits.max_segment_steps:
        raise CommandError(
            f"the segment lasts {q.shape[0] / rate:.3f} s, over the limit of "
            f"{limits.max_segment_steps / robot.control_rate:.3f} s"
        )
    return TrajectoryCommand(cmd.episode_id, cmd.index, cmd.max_commands, q, qd, qdd, rate, wait)
