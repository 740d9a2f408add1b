"""The learner's end of a channel, in Python.

    from episodic.bridge import Client
    with Client("default") as runner:
        start = runner.start_episode(1, context=[0.5, 0.2, 1.5])
        reply = runner.send_trajectory(q)          # q: (n_samples, n_dofs) rad, q[0] near start.posture
        log = runner.get_episode()                 # {"q": (n_steps, n_dofs), ...}

Every Reply carries ``posture`` (n_dofs,) rad, the posture held after the command: after a
start the start posture reached, after a segment where the next one must start (within the
robot's max_start_jump, else DISCONTINUOUS).

The calls are those of the in-process runner (episodic.sender.Sender): a learner written
against ``Runner`` runs unchanged against a ``Client``.
"""
from __future__ import annotations

import os
import time

import numpy as np
import posix_ipc

from episodic.bridge.blocks import Blocks
from episodic.bridge.channel import DEFAULT_CHANNEL, Channel, locked
from episodic.bridge.codec import decode_reply, encode_command
from episodic.bridge.layout import LayoutError
from episodic.commands import Command
from episodic.protocol import Reply
from episodic.sender import Sender

POLL = 0.2  # s between checks that the runner is still alive (its lock) while waiting


class ProtocolError(RuntimeError):
    """The runner speaks another protocol version, or answered something it should not have."""


class RunnerGone(TimeoutError):
    """The runner process died while the client waited for it."""


class Client(Sender):
    """Attach once to a runner's channel; every call sends one command and waits for its reply.

    ``timeout`` s: longest wait for a reply (a 2 s segment in blocking mode takes milliseconds;
    a real robot takes its real duration).
    """

    def __init__(self, channel: str = DEFAULT_CHANNEL, timeout: float = 30.0):
        # episode ids start from the clock, so a new client's differ from a previous client's
        super().__init__(first_episode_id=int(time.time_ns() // 1000 % 2**40) * 1000)
        self.channel_name = channel
        self.timeout = timeout
        try:
            self._channel = Channel.attach(channel)
        except LayoutError as exc:
            raise ProtocolError(f"channel '{channel}': {exc}") from None
        self._blocks = Blocks(self._channel.mm, self._channel.layout)
        self.sizes = self._channel.layout.sizes
        self.n_dofs, self.control_rate = self.sizes.n_dofs, self.sizes.control_rate
        self.state_names = self.sizes.state_names
        self.runner_pid = int(self._blocks.header["runner_pid"])
        self._seq = int(self._blocks.reply["seq"])
        self._log_rows = 0

    def _deliver(self, command: Command) -> Reply:
        self._seq += 1
        with locked(self._channel.lock):
            encode_command(self._blocks, command, self._seq, os.getpid())
        self._channel.cmd_ready.release()
        return self._wait_reply(command.episode_id)

    def _wait_reply(self, episode_id: int) -> Reply:
        deadline = time.monotonic() + self.timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"the runner on channel '{self.channel_name}' did not answer within "
                                   f"{self.timeout} s")
            try:
                self._channel.reply_ready.acquire(min(POLL, left))
            except posix_ipc.BusyError:
                if not self._channel.runner_alive():
                    raise RunnerGone(f"the runner of channel '{self.channel_name}' (pid {self.runner_pid}) "
                                     f"has exited") from None
                continue
            with locked(self._channel.lock):
                answer = decode_reply(self._blocks)
            if answer.seq != self._seq:
                continue  # the late answer to a command that timed out
            self._log_rows = answer.log_rows
            if answer.reply.episode_id != episode_id:
                raise ProtocolError(f"reply for episode {answer.reply.episode_id}, expected {episode_id}")
            return answer.reply

    def get_episode(self) -> dict[str, np.ndarray]:
        rows = 0 if self.last_reply is None else self._log_rows
        with locked(self._channel.lock):
            out = {name: view[:rows].copy() for name, view in self._blocks.log.items()}
        out = {k: v[:, 0] if v.shape[1] == 1 else v for k, v in out.items()}
        for i, name in enumerate(self.state_names):
            out[name] = out["task_state"][:, i]
        return out

    def close(self) -> None:
        self._blocks.release()
        self._channel.close()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
