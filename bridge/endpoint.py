"""The runner's end of a channel: waits for commands, runs them, answers, and keeps the
episode-log block up to date. Nothing a client writes can make it raise."""
from __future__ import annotations

import logging
import time
from typing import Callable

import numpy as np
import posix_ipc

from episodic.bridge.blocks import Blocks
from episodic.bridge.channel import DEFAULT_CHANNEL, Channel, locked, pid_alive
from episodic.bridge.codec import ReplyBlock, decode_command, encode_reply, read_command_fields
from episodic.bridge.layout import Layout, Sizes
from episodic.columns import step_widths
from episodic.protocol import Flag, Reply
from episodic.runner import Runner, StepCursor

log = logging.getLogger("episodic.serve")
SPARE_TIME = 0.25  # share of a control period a waiting realtime runner spends writing its log


class Endpoint:
    """Serve ``runner`` on ``channel``. ``learner_timeout`` s: a running episode whose learner
    stays silent that long (or whose process dies) is aborted with Flag.TIMEOUT."""

    def __init__(self, runner: Runner, channel: str = DEFAULT_CHANNEL, learner_timeout: float = 10.0,
                 max_log_steps: int = 60_000):
        self.runner = runner
        self.learner_timeout = learner_timeout
        n_state = len(runner.state_names)
        sizes = Sizes(runner.n_dofs, runner.limits.max_segment_steps, max_log_steps, runner.limits.max_context,
                      runner.state_names, step_widths(runner.n_dofs, n_state), runner.control_rate)
        self.channel = Channel.create(channel, Layout(sizes))
        self.blocks = Blocks(self.channel.mm, self.channel.layout)
        self._cursor = StepCursor()
        self._log_rows = 0
        self._truncated = False  # the episode in the log block outgrew it
        self._last_command = time.monotonic()
        self._learner_pid = 0
        self._last_taken: tuple[int, int] | None = None  # (seq, client_pid) of the last command read
        self.blocks.header["status"] = 1

    # -- loop ----------------------------------------------------------------
    def serve(self, stop: Callable[[], bool], poll: float = 0.1) -> None:
        """Answer commands until ``stop()`` is true (checked at least every ``poll`` s). A paced
        (real-time) runner ticks instead: the robot holds one control step at a time, and a
        command is taken at the first tick after it arrives."""
        if self.runner.paced:
            self._serve_ticking(stop, poll)
            return
        while not stop():
            try:
                self.channel.cmd_ready.acquire(poll)
            except posix_ipc.BusyError:
                self._check_learner()
                continue
            except posix_ipc.SignalError:
                continue  # a signal (e.g. SIGTERM) interrupted the wait: check stop()
            self.serve_one()

    def _serve_ticking(self, stop: Callable[[], bool], poll: float) -> None:
        dt = 1.0 / self.runner.control_rate
        check_every = max(int(poll / dt), 1)
        tick = 0
        while not stop():
            try:
                self.channel.cmd_ready.acquire(0)
            except posix_ipc.BusyError:
                self.runner.idle(1)
                self.runner.spare_time(SPARE_TIME * dt)
                tick += 1
                if tick % check_every == 0:
                    self._check_learner()
                continue
            except posix_ipc.SignalError:
                continue
            self.serve_one()

    def serve_one(self) -> Reply | None:
        """Read the command block, mark it taken, run it, write the reply and the new log rows, post
        'reply ready' (None, and no reply, when the block holds the command read last: posted twice)."""
        with locked(self.channel.lock):
            c = read_command_fields(self.blocks)
            self.blocks.header["taken_seq"] = c["seq"]  # a client may write its next command now
            if (c["seq"], c["client_pid"]) == self._last_taken:
                return None  # a second post of a block already read (and answered)
            self._last_taken = (c["seq"], c["client_pid"])
            self._learner_pid = c["client_pid"]
            command = decode_command(self.blocks, c)
        reply = self.runner.send(command)
        with locked(self.channel.lock):
            try:
                truncated = self._update_log()
                encode_reply(self.blocks, ReplyBlock(c["seq"], c["kind"], reply, self._log_rows, truncated))
            except Exception as exc:  # noqa: BLE001 - the learner gets an answer whatever happens
                log.exception("could not write the reply")
                reply = Reply(reply.episode_id, reply.index, Flag.INTERNAL_ERROR, 0.0,
                              np.full(len(self.runner.state_names), np.nan), 0, True,
                              f"the runner could not write its reply ({type(exc).__name__}: {exc})",
                              posture=reply.posture)
                encode_reply(self.blocks, ReplyBlock(c["seq"], c["kind"], reply, self._log_rows, False))
        self._last_command = time.monotonic()
        self.channel.reply_ready.release()
        return reply

    def _check_learner(self) -> None:
        episode_id = self.runner.running_episode
        if episode_id is None:
            return
        silent = time.monotonic() - self._last_command
        if self._learner_pid and not pid_alive(self._learner_pid):
            message = f"the learner process {self._learner_pid} died"
        elif silent > self.learner_timeout:
            message = f"no command for {silent:.1f} s (learner timeout {self.learner_timeout} s)"
        else:
            return
        log.warning("episode %d aborted: %s", episode_id, message)
        self.runner.abort(Flag.TIMEOUT, message)
        with locked(self.channel.lock):
            self._update_log()

    # -- the log block ---------------------------------------------------------
    def _update_log(self) -> bool:
        """Copy the steps the current (or last) episode added since the previous call; True when
        the episode has outgrown the log block."""
        cursor, blocks = self.runner.steps_since(self._cursor)
        if cursor.episode != self._cursor.episode:
            self._log_rows, self._truncated = 0, False
        self._cursor = cursor
        capacity = self.channel.layout.sizes.max_log_steps
        for block in blocks:
            n = len(block["time"])
            take = min(n, capacity - self._log_rows)
            self._truncated |= take < n
            if take > 0:
                rows = slice(self._log_rows, self._log_rows + take)
                for name, view in self.blocks.log.items():
                    view[rows] = np.reshape(block[name][:take], (take, -1))
                self._log_rows += take
        return self._truncated

    def close(self) -> None:
        """Mark the channel closed and remove its objects."""
        if self.blocks.header is not None:
            self.blocks.header["status"] = 2
        self.blocks.release()
        self.channel.close()
