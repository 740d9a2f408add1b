"""SL's conventions for a task: how a learner written for the IAS lab's SL bridge (its Matlab MEX
pair, clients/README.md) is answered. A task declares an ``SLMap`` as its class attribute ``sl``:
which of SL's zero-padded start values are its context, how many of SL's controller values are its
task gains and for how long SL runs its controller, and which of its state columns are SL's
per-step task states (ball position rows 1-3, ball velocity 4-6, cup or target 7-9).

``sl_command`` turns a command that carries SL's layout (a start context or task gains of exactly
SL_VALUES values: no task takes that many of its own) into the task's own command, or into a
refusal that names what the task does not model. Any other command passes unchanged."""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

from episodic.interface.commands import Command, GainsCommand, MalformedCommand, StartCommand
from episodic.interface.robot import Robot
from episodic.interface.vocabulary import Feedforward
from episodic.task.contract import Task

SL_VALUES = 10  # values of SL's start context and controller parameters (its learners zero-pad to this)
SL_STATE_ROWS = 9  # SL's per-step task state rows: ball position (3), ball velocity (3), cup or target (3)


@dataclass(frozen=True)
class SLMap:
    """A task's SL conventions.

    ``slots``: SL's start values in SL's order, each named with its unit (what a refusal names);
    ``context``: the task's context built from them, entry by entry: an int is a position in
    ``slots`` (0-based), a str the name of one of the task's parameters (its value as set); a slot
    that ``context`` does not use must be 0, as the task does not model it. ``gains``: SL's
    leading controller values that are the task gains (0: the task has no controller of its own);
    ``duration``: s the controller runs, a number or a task parameter's name (None: no controller).
    ``states``: SL_STATE_ROWS names of the task's state columns (None: a row the task lacks, 0)."""

    slots: tuple[str, ...] = ()
    context: tuple[int | str, ...] = ()
    gains: int = 0
    duration: float | str | None = None
    states: tuple[str | None, ...] = (None,) * SL_STATE_ROWS

    def __post_init__(self) -> None:
        if len(self.slots) > SL_VALUES or len(self.states) != SL_STATE_ROWS:
            raise ValueError(f"an SLMap has at most {SL_VALUES} slots and exactly {SL_STATE_ROWS} states")
        if any(isinstance(c, int) and not 0 <= c < len(self.slots) for c in self.context):
            raise ValueError(f"SLMap.context positions must lie in 0..{len(self.slots) - 1}")
        if not 0 <= self.gains <= SL_VALUES:
            raise ValueError(f"SLMap.gains must lie in 0..{SL_VALUES}")


def _parameter(params: dict, name: str) -> float:
    if name not in params:
        raise ValueError(f"the task's SL map names parameter '{name}', which the task does not have")
    return float(params[name])


def sl_context(sl: SLMap, values: np.ndarray, params: dict) -> np.ndarray:
    """The task's context from SL's SL_VALUES start values (``params``: the task's parameters).
    ValueError naming the slot when a value the task does not model is not 0."""
    used = {c for c in sl.context if isinstance(c, int)}
    for k, v in enumerate(values):
        if v != 0 and k not in used:
            what = f"SL's '{sl.slots[k]}'" if k < len(sl.slots) else "beyond SL's layout of this task"
            raise ValueError(f"SL start value {k + 1} is {v:g} ({what}); this task does not model it: send 0")
    return np.array([values[c] if isinstance(c, int) else _parameter(params, c) for c in sl.context], float)


def sl_states(sl: SLMap, state_names: tuple[str, ...]) -> list[int | None]:
    """Per SL state row, the index of its column in ``state_names`` (None: 0 in that row)."""
    return [None if name is None else state_names.index(name) for name in sl.states]


def sl_command(task: Task, robot: Robot, command: Command | MalformedCommand) -> Command | MalformedCommand:
    """``command`` in ``task``'s terms when it carries SL's layout: a start whose context has
    SL_VALUES values (its context by the task's ``sl`` map), a gain set whose task gains have SL_VALUES values (SL's
    controller command: the robot's own gains and feedforward, the leading ``sl.gains`` values as
    task gains, held for ``sl.duration``). A MalformedCommand saying why when the task cannot
    answer it (no SL map, a value it does not model); any other command unchanged."""
    sl: SLMap | None = getattr(task, "sl", None)
    if isinstance(command, StartCommand) and command.context.size == SL_VALUES:
        if sl is None:
            return _refused(command, "this task declares no SL map: send its own context (see `episodic tasks`)")
        try:
            return dataclasses.replace(command, context=sl_context(sl, command.context, task.params()))
        except ValueError as exc:
            return _refused(command, str(exc))
    if isinstance(command, GainsCommand) and command.task_gains is not None \
            and np.size(command.task_gains) == SL_VALUES:
        gains = np.asarray(command.task_gains, float)
        if sl is None or sl.duration is None:
            return _refused(command, "this task has no controller of its own for SL to run (its SL map gives "
                                     "no duration): send a motion command (a trajectory) instead")
        if np.any(gains[sl.gains:] != 0):
            return _refused(command, f"SL's controller parameters beyond the first {sl.gains} are not 0; this "
                                     f"task's controller takes {sl.gains}")
        duration = sl.duration if not isinstance(sl.duration, str) else _parameter(task.params(), sl.duration)
        return GainsCommand(command.episode_id, command.index, command.max_commands, robot.kp.copy(),
                            robot.kd.copy(), robot.ki.copy(), Feedforward.parse(robot.feedforward), duration,
                            gains[:sl.gains].copy() if sl.gains else None)
    return command


def _refused(command: Command, reason: str) -> MalformedCommand:
    return MalformedCommand(command.episode_id, command.index, command.max_commands, f"SL's layout: {reason}")
