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
from episodic.bridge.channel import DEFAULT_CHANNEL, Channel, check_name, locked
from episodic.bridge.codec import decode_reply, encode_command
from episodic.bridge.layout import LayoutError
from episodic.commands import Command
from episodic.protocol import Reply
from episodic.sender import Sender

POLL = 0.2  # s between checks that the runner is still alive (its lock) while waiting
TAKEN_POLL = 0.002  # s between looks whether the runner has taken the previous command


class ProtocolError(RuntimeError):
    """The runner speaks another protocol version, or answered something it should not have."""


class RunnerGone(TimeoutError):
    """The runner process died while the client waited for it."""


class Client(Sender):
    """Attach once to a runner's channel (the only client on it while attached: a second one is
    refused with ChannelInUse); every call sends one command and waits for its reply.

    ``timeout`` s: longest wait for a reply (a 2 s segment in blocking mode takes milliseconds;
    a real robot takes its real duration). A command sent while the runner has not yet taken
    this client's previous one (that one timed out) waits for it within the same timeout.
    """

    def __init__(self, channel: str = DEFAULT_CHANNEL, timeout: float = 30.0):
        # episode ids start from the clock, so a new client's differ from a previous client's
        super().__init__(first_episode_id=int(time.time_ns() // 1000 % 2**40) * 1000)
        self.channel_name = check_name(channel)
        self.timeout = timeout
        try:
            self._channel = Channel.attach(channel)
        except LayoutError as exc:
            raise ProtocolError(f"channel '{channel}': {exc}") from None
        try:
            self._channel.hold_client()
        except BaseException:
            self._channel.close()
            raise
        self._blocks = Blocks(self._channel.mm, self._channel.layout)
        self.sizes = self._channel.layout.sizes
        self.n_dofs, self.control_rate = self.sizes.n_dofs, self.sizes.control_rate
        self.state_names = self.sizes.state_names
        self.runner_pid = int(self._blocks.header["runner_pid"])
        self._seq = int.from_bytes(os.urandom(8), "little")  # this client's own numbers, no other's
        self._log_rows = 0

    def _deliver(self, command: Command) -> Reply:
        self._seq = (self._seq + 1) % 2**64
        deadline = time.monotonic() + self.timeout
        self._write_when_taken(command, deadline)
        self._channel.cmd_ready.release()
        return self._wait_reply(command, deadline)

    def _write_when_taken(self, command: Command, deadline: float) -> None:
        """Write ``command`` into the command block once the runner has taken this client's
        previous command out of it (that one timed out and the runner is still busy), so that no
        posted command is overwritten unread."""
        blocks = self._blocks
        while True:
            with locked(self._channel.lock):
                pending = (blocks.command["client_pid"] == os.getpid()
                           and blocks.command["seq"] != blocks.header["taken_seq"])
                if not pending:
                    encode_command(blocks, command, self._seq, os.getpid())
                    return
            if not self._channel.runner_alive():
                raise RunnerGone(f"the runner of channel '{self.channel_name}' (pid {self.runner_pid}) "
                                 f"has exited")
            if time.monotonic() >= deadline:
                raise TimeoutError(f"the runner on channel '{self.channel_name}' has not taken this client's "
                                   f"previous command within {self.timeout} s (it is still busy with an "
                                   f"earlier one); this command was not sent")
            time.sleep(TAKEN_POLL)

    def _wait_reply(self, command: Command, deadline: float) -> Reply:
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
            got = (answer.kind, answer.reply.index, answer.reply.episode_id)
            if got != (int(command.kind), command.index, command.episode_id):
                raise ProtocolError(f"the reply to command {self._seq} on channel '{self.channel_name}' is for "
                                    f"kind {got[0]}, index {got[1]}, episode {got[2]}; expected kind "
                                    f"{int(command.kind)}, index {command.index}, episode {command.episode_id}")
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
