"""The calls a learner makes, built on one primitive, ``send(command) -> Reply``.

``Sender`` is shared by the in-process :class:`episodic.runtime.runner.Runner` and every client
(:class:`episodic.bridge.Client`), so a learner written against one runs unchanged against the
other. The convenience calls build the command objects of :mod:`episodic.interface.commands` (same names,
same order; everything after the required arguments is keyword-only) and send them; the
episode id and the next index are tracked from what was sent.
"""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from numpy.typing import ArrayLike

from episodic.interface.commands import (
    Command,
    GainsCommand,
    MalformedCommand,
    ResetCommand,
    StartCommand,
    TrajectoryCommand,
    unchecked,
)
from episodic.interface.vocabulary import Feedforward, Reply


class Sender:
    """Subclasses implement ``_deliver(command) -> Reply`` and ``get_episode()`` and set
    ``n_dofs``, ``control_rate`` Hz and ``state_names`` (the task's state columns)."""

    n_dofs: int
    control_rate: float
    state_names: tuple[str, ...]

    def __init__(self, first_episode_id: int = 0):
        self.episode_id = first_episode_id  # of the episode last started (or the id before the first)
        self._next_index = 1
        self._max_commands = 1  # before any start, a segment is answered OUT_OF_ORDER, not refused for its size
        self.last_reply: Reply | None = None

    def send(self, command: Command | MalformedCommand) -> Reply:
        """Send one command object as it is (episode id and index included) and return its reply (a
        MalformedCommand, what the bridge could not read, goes to a runner, which refuses it)."""
        reply = self._deliver(command)
        if isinstance(command, StartCommand):
            self.episode_id, self._next_index, self._max_commands = command.episode_id, 1, command.max_commands
        elif isinstance(command, (TrajectoryCommand, GainsCommand)):
            self.episode_id, self._next_index = command.episode_id, command.index + 1
        self.last_reply = reply
        return reply

    def send_episode(self, commands: Sequence[Command]) -> list[Reply]:
        """Send an episode's command objects (a start, then its segments and gain sets) in order
        until one of them ends the episode (its reply's ``episode_done``: the last segment, or a
        refusal); the replies, one per command sent (the rest are not sent)."""
        replies: list[Reply] = []
        for command in commands:
            replies.append(self.send(command))
            if replies[-1].episode_done:
                break
        return replies

    def _deliver(self, command: Command | MalformedCommand) -> Reply:
        raise NotImplementedError

    def get_episode(self, *, copy: bool = True) -> dict[str, np.ndarray]:
        """The current or last episode's per-step log: each column (n_steps,) or (n_steps, width)
        (episodic.interface.columns), and each task state column by its name. ``copy=False`` lets a sender
        hand out read-only views of its own storage instead of fresh arrays (the bridge's Client
        does: nothing is copied), valid only until the next command."""
        raise NotImplementedError

    # -- convenience calls ---------------------------------------------------
    def start_episode(self, max_commands: int = 1, *, posture: ArrayLike | None = None,
                      context: ArrayLike | None = None, episode_id: int | None = None) -> Reply:
        """Index 0: go to ``posture`` (n_dofs,) rad or the task's default start, then reset the task
        from ``context`` (n_context,); the reply comes once the start is reached. ``episode_id``
        defaults to the previous one plus 1."""
        episode_id = self.episode_id + 1 if episode_id is None else episode_id
        context = np.zeros(0) if context is None else np.asarray(context, dtype=float).ravel()
        return self.send(StartCommand(episode_id, max_commands, posture=unchecked(posture), context=context))

    def send_trajectory(self, q: ArrayLike, *, qd: ArrayLike | None = None, qdd: ArrayLike | None = None,
                        rate: float | None = None, wait_time: float = 0.0, index: int | None = None,
                        max_commands: int | None = None) -> Reply:
        """A segment: q, qd, qdd (n_samples, n_dofs) rad, rad/s, rad/s^2 at ``rate`` Hz (None: the
        control rate); the final posture is then held ``wait_time`` s. ``index`` and
        ``max_commands`` default to the next index of the running episode."""
        return self.send(TrajectoryCommand(self.episode_id, *self._position(index, max_commands), unchecked(q),
                                           unchecked(qd), unchecked(qdd), rate, wait_time))

    def send_gains(self, kp: ArrayLike, kd: ArrayLike, *, ki: ArrayLike | None = None,
                   feedforward: Feedforward | str | int = Feedforward.GRAVITY_COMPENSATION, wait_time: float = 0.0,
                   task_gains: ArrayLike | None = None, index: int | None = None,
                   max_commands: int | None = None) -> Reply:
        """A gain set for the next segments: kp N m/rad, kd N m s/rad, ki N m/(rad s), (n_dofs,)
        each, and the feedforward mode (none, gravity_compensation, feedforward,
        inverse_dynamics); ``task_gains`` feed the task's own feedback law (see `episodic tasks`).
        The posture is then held ``wait_time`` s."""
        return self.send(GainsCommand(self.episode_id, *self._position(index, max_commands), unchecked(kp),
                                      unchecked(kd), unchecked(ki), unchecked(feedforward), wait_time,
                                      unchecked(task_gains)))

    def reset(self) -> Reply:
        """Abort the running episode."""
        return self.send(ResetCommand(self.episode_id, max_commands=self._max_commands))

    def _position(self, index: int | None, max_commands: int | None) -> tuple[int, int]:
        return (self._next_index if index is None else index,
                self._max_commands if max_commands is None else max_commands)
