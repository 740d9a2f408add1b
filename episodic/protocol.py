"""What a reply carries: the flags, the machine states and the Reply itself (no physics here,
so learner-side code can import it)."""
from __future__ import annotations

import enum
from dataclasses import dataclass

import numpy as np


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


@dataclass(frozen=True)
class Reply:
    """Answer to one command: reward of the segment, the task state after it
    (n_state,) in the task's column order, and the flag. ``message`` explains a flag."""

    episode_id: int
    index: int
    flag: Flag
    reward: float
    state: np.ndarray
    n_steps: int
    episode_done: bool
    message: str = ""
    machine_state: MachineState = MachineState.RESTART
