"""The learner's end of a channel, in Python.

    from bridge import Client
    with Client("default") as runner:
        runner.start_episode(context=[0.5, 0.2, 1.5], max_commands=1)
        reply = runner.send_trajectory(q)          # q: (n_samples, n_dofs) rad
        log = runner.get_episode()                 # {"q": (n_steps, n_dofs), ...}
"""
from __future__ import annotations

import os
import time

import numpy as np
import posix_ipc

from bridge.blocks import Blocks
from bridge.channel import DEFAULT_CHANNEL, Channel, locked, pid_alive
from bridge.layout import COMMAND, COMMAND_STRUCT, MAGIC, REPLY, REPLY_STRUCT, VERSION, LayoutError
from episodic.commands import (Feedforward, GainsCommand, Kind, ResetCommand, StartCommand,
                               TrajectoryCommand)
from episodic.protocol import Flag, MachineState, Reply

POLL = 0.2  # s between checks that the runner is still alive while waiting
_COMMAND_DEFAULTS = {name: 0 for name in COMMAND.names} | {"magic": MAGIC, "version": VERSION,
                                                           "rate": 0.0, "wait_time": 0.0}


class ProtocolError(RuntimeError):
    """The runner speaks another protocol version, or answered something it should not have."""


class RunnerGone(TimeoutError):
    """The runner process died while the client waited for it."""


class Client:
    """Attach once to a runner's channel; every call sends one command and waits for its reply.

    ``timeout`` s: longest wait for a reply (a 2 s segment in blocking mode takes milliseconds;
    a real robot takes its real duration).
    """

    def __init__(self, channel: str = DEFAULT_CHANNEL, timeout: float = 30.0):
        self.channel_name = channel
        self.timeout = timeout
        try:
            self._channel = Channel.attach(channel)
        except LayoutError as exc:
            raise ProtocolError(f"channel '{channel}': {exc}") from None
        self._blocks = Blocks(self._channel.mm, self._channel.layout)
        self.sizes = self._channel.layout.sizes
        self.runner_pid = int(self._blocks.header["runner_pid"])
        self._command_offset = self._channel.layout.command_offset
        self._reply_offset = self._channel.layout.reply_offset
        self._seq = int(self._blocks.reply["seq"])
        self._episode_id = int(time.time_ns() // 1000 % 2**40) * 1000
        self._next_index = 0
        self._max_commands = 0
        self.last_reply: Reply | None = None

    # -- commands ------------------------------------------------------------
    def start_episode(self, context=None, posture=None, max_commands: int = 1,
                      episode_id: int | None = None) -> Reply:
        """Index 0: go to ``posture`` (n_dofs,) rad or the task's default start, reset the task
        from ``context``; the reply comes once the start is reached."""
        self._episode_id = self._episode_id + 1 if episode_id is None else int(episode_id)
        self._max_commands = int(max_commands)
        context = np.zeros(0) if context is None else np.asarray(context, dtype=float).ravel()
        if context.size > self.sizes.max_context:
            raise ValueError(f"context has {context.size} values; the runner takes at most {self.sizes.max_context}")
        arrays = {"context": context}
        if posture is not None:
            arrays["posture"] = self._row(posture, "posture")
        reply = self._send(Kind.START, 0, arrays, n_context=context.size, has_posture=posture is not None)
        self._next_index = 1
        return reply

    def send_trajectory(self, q, qd=None, qdd=None, rate: float | None = None, wait_time: float = 0.0,
                        index: int | None = None, max_commands: int | None = None) -> Reply:
        """A segment: q, qd, qdd (n_samples, n_dofs) rad, rad/s, rad/s^2 at ``rate`` Hz (None: the
        control rate); the final posture is held ``wait_time`` s. index/max_commands default to
        the next index of the current episode."""
        q = self._matrix(q, "q")
        arrays = {"q": q}
        for name, value in (("qd", qd), ("qdd", qdd)):
            if value is not None:
                arrays[name] = self._matrix(value, name)
                if arrays[name].shape != q.shape:
                    raise ValueError(f"{name} must have q's shape {q.shape}, got {arrays[name].shape}")
        return self._segment(Kind.TRAJECTORY, arrays, index, max_commands, n_samples=q.shape[0],
                             has_qd=qd is not None, has_qdd=qdd is not None, rate=rate or 0.0,
                             wait_time=wait_time)

    def send_gains(self, kp, kd, ki=None, mode: str | int = "gravity_compensation", wait_time: float = 0.0,
                   task_gains=None, index: int | None = None, max_commands: int | None = None) -> Reply:
        """A gain set (n_dofs,) each, N m/rad, N m s/rad, N m/(rad s), and the feedforward mode
        (none, gravity_compensation, feedforward, inverse_dynamics) for the next segments;
        ``task_gains`` feed the task's own feedback law (see `episodic tasks`). The posture is
        then held for ``wait_time`` s."""
        arrays = {"kp": self._row(kp, "kp"), "kd": self._row(kd, "kd")}
        if ki is not None:
            arrays["ki"] = self._row(ki, "ki")
        n_context = 0
        if task_gains is not None:
            arrays["context"] = np.asarray(task_gains, dtype=float).ravel()
            n_context = arrays["context"].size
            if n_context > self.sizes.max_context:
                raise ValueError(f"task_gains has {n_context} values; the runner takes at most {self.sizes.max_context}")
        return self._segment(Kind.GAINS, arrays, index, max_commands, has_ki=ki is not None, n_context=n_context,
                             feedforward=int(Feedforward.parse(mode)), wait_time=wait_time)

    def send(self, command) -> Reply:
        """Send an episodic.commands command object (Start/Trajectory/Gains/ResetCommand) as it
        is, episode id and index included: the same objects an in-process Runner takes."""
        if isinstance(command, StartCommand):
            return self.start_episode(command.context, command.posture, command.max_commands, command.episode_id)
        if isinstance(command, ResetCommand):
            self._episode_id = command.episode_id
            return self.reset()
        self._episode_id = command.episode_id
        head = dict(wait_time=command.wait_time, index=command.index, max_commands=command.max_commands)
        if isinstance(command, TrajectoryCommand):
            return self.send_trajectory(command.q, command.qd, command.qdd, command.rate, **head)
        if isinstance(command, GainsCommand):
            ki = command.ki if command.ki is None else np.asarray(command.ki)
            return self.send_gains(command.kp, command.kd, ki, int(Feedforward.parse(command.feedforward)),
                                   task_gains=command.task_gains, **head)
        raise TypeError(f"cannot send {type(command).__name__}; send a command from episodic.commands")

    def reset(self) -> Reply:
        """Abort the running episode."""
        return self._send(Kind.RESET, 0, {})

    def get_episode(self) -> dict[str, np.ndarray]:
        """The current or last episode's per-step log: each column (n_steps,) or (n_steps, width),
        and each task state column by its name."""
        rows = 0 if self.last_reply is None else self._log_rows
        with locked(self._channel.lock):
            out = {name: view[:rows].copy() for name, view in self._blocks.log.items()}
        out = {k: v[:, 0] if v.shape[1] == 1 else v for k, v in out.items()}
        for i, name in enumerate(self.sizes.state_names):
            out[name] = out["task_state"][:, i]
        return out

    # -- plumbing ------------------------------------------------------------
    def _segment(self, kind, arrays, index, max_commands, **fields) -> Reply:
        index = self._next_index if index is None else int(index)
        reply = self._send(kind, index, arrays, max_commands=max_commands, **fields)
        self._next_index = index + 1
        return reply

    def _row(self, value, name: str) -> np.ndarray:
        arr = np.asarray(value, dtype=float).ravel()
        if arr.size != self.sizes.n_dofs:
            raise ValueError(f"{name} needs {self.sizes.n_dofs} values, got {arr.size}")
        return arr

    def _matrix(self, value, name: str) -> np.ndarray:
        arr = np.asarray(value, dtype=float)
        if arr.ndim != 2 or arr.shape[1] != self.sizes.n_dofs:
            raise ValueError(f"{name} must be (n_samples, {self.sizes.n_dofs}), got {arr.shape}")
        if not 1 <= arr.shape[0] <= self.sizes.max_samples:
            raise ValueError(f"{name} has {arr.shape[0]} samples; the runner takes 1..{self.sizes.max_samples}")
        return arr

    def _send(self, kind: Kind, index: int, arrays: dict, max_commands: int | None = None, **fields) -> Reply:
        self._seq += 1
        values = dict(_COMMAND_DEFAULTS, seq=self._seq, client_pid=os.getpid(), episode_id=self._episode_id,
                      index=index, kind=int(kind), **fields,
                      max_commands=self._max_commands if max_commands is None else max_commands)
        with locked(self._channel.lock):
            COMMAND_STRUCT.pack_into(self._channel.mm, self._command_offset, *[values[n] for n in COMMAND.names])
            for name, value in arrays.items():
                self._blocks.command_arrays[name][: len(value)] = value
        self._channel.cmd_ready.release()
        return self._wait_reply()

    def _wait_reply(self) -> Reply:
        deadline = time.monotonic() + self.timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"the runner on channel '{self.channel_name}' did not answer within "
                                   f"{self.timeout} s")
            try:
                self._channel.reply_ready.acquire(min(POLL, left))
            except posix_ipc.BusyError:
                if not pid_alive(self.runner_pid):
                    raise RunnerGone(f"the runner of channel '{self.channel_name}' (pid {self.runner_pid}) "
                                     f"has exited") from None
                continue
            with locked(self._channel.lock):
                r = dict(zip(REPLY.names, REPLY_STRUCT.unpack_from(self._channel.mm, self._reply_offset)))
                if r["seq"] != self._seq:
                    continue  # the late answer to a command that timed out
                state = self._blocks.reply_state.copy()
            self._log_rows = r["log_rows"]
            reply = Reply(r["episode_id"], r["index"], Flag(r["flag"]), r["reward"], state, r["n_steps"],
                          bool(r["episode_done"]), r["message"].rstrip(b"\0").decode(errors="replace"),
                          MachineState(r["machine_state"]))
            if reply.episode_id != self._episode_id:
                raise ProtocolError(f"reply for episode {reply.episode_id}, expected {self._episode_id}")
            self.last_reply = reply
            return reply

    def close(self) -> None:
        self._blocks.release()
        self._channel.close()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
