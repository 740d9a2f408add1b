"""The vocabulary learner and runner share: command kinds, feedforward modes, flags, machine
states and the Reply itself (no physics here, so learner-side code can import it)."""
from __future__ import annotations

import enum
from dataclasses import dataclass

import numpy as np


class CommandError(ValueError):
    """A command is malformed; the message says what to change."""


class Kind(enum.IntEnum):
    """Payload kind, as stored in logs and on the wire (BATCH and BATCH_LOG travel only on the
    wire: a population of episodes, and the fetch of one of its per-step logs)."""

    START = 0
    TRAJECTORY = 1
    GAINS = 2
    RESET = 3
    BATCH = 4
    BATCH_LOG = 5
    MALFORMED = -1


class Feedforward(enum.IntEnum):
    """u_ff of SL's law: none (PD), gravity compensation, inverse dynamics of the
    desired state (feedforward), or inverse dynamics at the measured state."""

    NONE = 0
    GRAVITY_COMPENSATION = 1
    FEEDFORWARD = 2
    INVERSE_DYNAMICS = 3

    @classmethod
    def parse(cls, value: str | int | Feedforward) -> Feedforward:
        if isinstance(value, str):
            try:
                return cls[value.upper()]
            except KeyError:
                names = ", ".join(m.name.lower() for m in cls)
                raise CommandError(f"unknown feedforward mode '{value}'; use one of {names}") from None
        if isinstance(value, (int, np.integer)) and not isinstance(value, bool) and value in cls._value2member_map_:
            return cls(int(value))
        names = ", ".join(f"{m.value} {m.name.lower()}" for m in cls)
        raise CommandError(f"unknown feedforward mode {value!r}; use one of {names}")


class MachineState(enum.IntEnum):
    RESTART = 0
    GOTO_START = 1
    WAIT_FOR_START = 2
    DO_MOTION = 3
    WAIT_FOR_COMMAND = 4


class Flag(enum.IntEnum):
    """Outcome of a command, in every reply and in the log."""

    OK = 0
    OUT_OF_ORDER = 1
    STALE_EPISODE = 2
    INVALID_PAYLOAD = 3
    SAFETY_ABORT = 4
    TIMEOUT = 5
    ABORTED_BY_LEARNER = 6
    INTERRUPTED = 7
    DISCONTINUOUS = 8
    INTERNAL_ERROR = 9
    LEARNER_GONE = 10  # the learner's process ended (or its client detached) with its episode running


@dataclass  # not frozen: a frozen dataclass costs about 1 us more to build, on both ends of every command
class Reply:
    """Answer to one command: reward of the segment, the task state after it
    (n_state,) in the task's column order, and the flag. ``message`` explains a flag.

    ``posture`` (n_dofs,) rad is the posture the robot holds after the command: after a start,
    the start posture reached; after a segment (or a refusal), where the next segment must start
    (its first sample within the robot's max_start_jump of it, else DISCONTINUOUS). None only in
    a reply built without the machine (the bridge's could-not-write-the-reply answer; NaN on
    the wire).

    ``episode_return`` is the return of the command's episode so far: the rewards of its replies
    up to this one, the charge for an early end included (what the log records as the episode's
    return once it has ended). In the reply that ends an episode (``episode_done``), ``flag``
    says how it ended and ``success`` whether the task counts it as solved (always False in any
    other reply, and in an episode that did not end with Flag.OK). ``reward`` of that reply
    includes the early end's charge (``Task.worst_reward_rate``, ``Task.scored_duration``)."""

    episode_id: int
    index: int
    flag: Flag
    reward: float
    state: np.ndarray
    n_steps: int
    episode_done: bool
    message: str = ""
    machine_state: MachineState = MachineState.RESTART
    posture: np.ndarray | None = None
    success: bool = False
    episode_return: float = 0.0


@dataclass(frozen=True)
class EpisodeResult:
    """The outcome of one episode of a batch (episodic.tools.batch in-process, ``Client.evaluate`` over
    the bridge).

    ``rewards``, ``flags``, ``task_states`` (n_replies, n_state) in the task's column order and
    ``command_steps``: one entry per command sent (the start included; commands after the one
    that ended the episode are not sent). ``episode_return`` the sum of ``rewards``; ``flag``
    the episode's end flag (Flag.OK when it ran to its last segment), ``message`` why not;
    ``success`` the task's verdict; ``n_steps`` every control step of the episode, the move to
    the start included; ``steps`` the per-step log (column -> array, as ``Runner.get_episode``)
    when asked for with ``keep_steps``, else None."""

    episode_return: float
    rewards: np.ndarray
    flags: tuple[Flag, ...]
    task_states: np.ndarray
    command_steps: np.ndarray
    flag: Flag
    message: str
    success: bool
    n_steps: int
    state_names: tuple[str, ...]
    steps: dict[str, np.ndarray] | None = None

    @property
    def task_state(self) -> np.ndarray:
        """The task state after the last command sent (n_state,)."""
        return self.task_states[-1]
