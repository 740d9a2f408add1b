"""The runner's end of a channel: waits for commands, runs them, answers, and keeps the
episode-log block up to date. Nothing a client writes can make it raise."""
from __future__ import annotations

import logging
import time
from typing import Callable

import numpy as np
import posix_ipc

from bridge.blocks import Blocks
from bridge.channel import DEFAULT_CHANNEL, Channel, locked, pid_alive
from bridge.layout import (COMMAND, COMMAND_STRUCT, MAGIC, MESSAGE_BYTES, REPLY, REPLY_STRUCT, VERSION,
                           Layout, Sizes)
from episodic.commands import (GainsCommand, Kind, MalformedCommand, ResetCommand, StartCommand,
                               TrajectoryCommand)
from episodic.log import STEP_COLUMNS, EpisodeBuffer
from episodic.protocol import Flag, Reply
from episodic.runner import Runner

log = logging.getLogger("episodic.serve")
SPARE_TIME = 0.25  # share of a control period a waiting realtime runner spends writing its log


def log_columns(n_dofs: int, n_state: int) -> tuple[tuple[str, int], ...]:
    """Per-step columns of the log block, in STEP_COLUMNS order, with their widths."""
    wide = {"q", "qd", "qdd", "q_d", "qd_d", "qdd_d", "u", "u_ff"}
    width = {"ee_pos": 3, "ee_quat": 4, "task_state": n_state}
    return tuple((name, n_dofs if name in wide else width.get(name, 1)) for name in STEP_COLUMNS)


class Endpoint:
    """Serve ``runner`` on ``channel``. ``learner_timeout`` s: a running episode whose learner
    stays silent that long (or whose process dies) is aborted with Flag.TIMEOUT."""

    def __init__(self, runner: Runner, channel: str = DEFAULT_CHANNEL, learner_timeout: float = 10.0,
                 max_log_steps: int = 60_000):
        self.runner = runner
        self.learner_timeout = learner_timeout
        n_dofs = runner.robot.n_dofs
        sizes = Sizes(n_dofs, runner.limits.max_segment_steps, max_log_steps, runner.limits.max_context,
                      tuple(runner.task.columns), log_columns(n_dofs, len(runner.task.columns)),
                      runner.robot.control_rate)
        self.channel = Channel.create(channel, Layout(sizes))
        self.blocks = Blocks(self.channel.mm, self.channel.layout)
        self._command_offset = self.channel.layout.command_offset
        self._reply_offset = self.channel.layout.reply_offset
        self._log_episode: EpisodeBuffer | None = None
        self._log_blocks = 0
        self._log_rows = 0
        self._last_command = time.monotonic()
        self._learner_pid = 0
        self._last_seq = -1
        self.blocks.header["status"] = 1

    # -- loop ----------------------------------------------------------------
    def serve(self, stop: Callable[[], bool], poll: float = 0.1) -> None:
        """Answer commands until ``stop()`` is true (checked at least every ``poll`` s). A paced
        (real-time) runner ticks instead: the robot holds one control step at a time, and a
        command is taken at the first tick after it arrives."""
        if self.runner.sim.pacer is not None:
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
        check_every = max(int(poll / self.runner.robot.control_dt), 1)
        tick = 0
        while not stop():
            try:
                self.channel.cmd_ready.acquire(0)
            except posix_ipc.BusyError:
                self.runner.machine.idle(1)
                self.runner.spare_time(SPARE_TIME * self.runner.robot.control_dt)
                tick += 1
                if tick % check_every == 0:
                    self._check_learner()
                continue
            except posix_ipc.SignalError:
                continue
            self.serve_one()

    def serve_one(self) -> Reply | None:
        """Read the command block, run it, write the reply and the new log rows, post 'reply ready'
        (None, and no reply, when the block holds a command already answered)."""
        with locked(self.channel.lock):
            c = dict(zip(COMMAND.names, COMMAND_STRUCT.unpack_from(self.channel.mm, self._command_offset)))
            if c["seq"] == self._last_seq:
                return None  # posted twice (the client gave up and wrote anew before we read): answered
            self._learner_pid = c["client_pid"]
            command = self.decode(c)
        reply = self.runner.handle(command)
        with locked(self.channel.lock):
            try:
                truncated = self._update_log()
                self._write_reply(c["seq"], reply, truncated)
            except Exception as exc:  # noqa: BLE001 - the learner gets an answer whatever happens
                log.exception("could not write the reply")
                reply = Reply(reply.episode_id, reply.index, Flag.INTERNAL_ERROR, 0.0,
                              np.full(len(self.blocks.reply_state), np.nan), 0, True,
                              f"the runner could not write its reply ({type(exc).__name__}: {exc})")
                self._write_reply(c["seq"], reply, False)
            self._last_seq = c["seq"]
        self._last_command = time.monotonic()
        self.channel.reply_ready.release()
        return reply

    def _check_learner(self) -> None:
        machine = self.runner.machine
        if machine.episode is None:
            return
        silent = time.monotonic() - self._last_command
        if self._learner_pid and not pid_alive(self._learner_pid):
            message = f"the learner process {self._learner_pid} died"
        elif silent > self.learner_timeout:
            message = f"no command for {silent:.1f} s (learner timeout {self.learner_timeout} s)"
        else:
            return
        log.warning("episode %d aborted: %s", machine.episode.episode_id, message)
        self.runner.abort(Flag.TIMEOUT, message)
        with locked(self.channel.lock):
            self._update_log()

    # -- decoding ------------------------------------------------------------
    def decode(self, c: dict):
        """The command block's fixed fields ``c`` (COMMAND names -> values) and arrays as a
        command object (MalformedCommand when they cannot be read as one)."""
        a = self.blocks.command_arrays
        s = self.channel.layout.sizes
        head = dict(episode_id=c["episode_id"], index=c["index"], max_commands=c["max_commands"])
        if c["magic"] != MAGIC or c["version"] != VERSION:
            return MalformedCommand(**head, reason=f"command written by protocol {c['magic']!r} "
                                    f"version {c['version']}; this runner speaks version {VERSION}")
        kind = c["kind"]
        n_context = c["n_context"]
        if not 0 <= n_context <= s.max_context:
            return MalformedCommand(**head, reason=f"n_context {n_context} outside 0..{s.max_context}")
        if kind == Kind.START:
            return StartCommand(head["episode_id"], head["max_commands"],
                                a["posture"].copy() if c["has_posture"] else None, a["context"][:n_context].copy(),
                                index=head["index"])
        if kind == Kind.TRAJECTORY:
            n = c["n_samples"]
            if not 1 <= n <= s.max_samples:
                return MalformedCommand(**head, reason=f"n_samples {n} outside 1..{s.max_samples}")
            rate = c["rate"]
            return TrajectoryCommand(**head, q=a["q"][:n].copy(), qd=a["qd"][:n].copy() if c["has_qd"] else None,
                                     qdd=a["qdd"][:n].copy() if c["has_qdd"] else None,
                                     rate=None if rate == 0 else rate, wait_time=c["wait_time"])
        if kind == Kind.GAINS:
            return GainsCommand(**head, kp=a["kp"].copy(), kd=a["kd"].copy(),
                                ki=a["ki"].copy() if c["has_ki"] else None,
                                feedforward=c["feedforward"], wait_time=c["wait_time"],
                                task_gains=a["context"][:n_context].copy() if n_context else None)
        if kind == Kind.RESET:
            return ResetCommand(**head)
        return MalformedCommand(**head, reason=f"unknown command kind {kind}; use 0 start, 1 trajectory, 2 gains, 3 reset")

    # -- encoding ------------------------------------------------------------
    def _update_log(self) -> bool:
        """Copy the steps the current (or last) episode added since the previous call; True when
        the episode has outgrown the log block."""
        ep = self.runner.machine.last_episode
        if ep is None:
            return False
        if ep is not self._log_episode:
            self._log_episode, self._log_blocks, self._log_rows = ep, 0, 0
        capacity = self.channel.layout.sizes.max_log_steps
        truncated = False
        for block in ep.blocks[self._log_blocks:]:
            n = len(block["time"])
            take = min(n, capacity - self._log_rows)
            truncated |= take < n
            if take > 0:
                rows = slice(self._log_rows, self._log_rows + take)
                for name, view in self.blocks.log.items():
                    view[rows] = np.reshape(block[name][:take], (take, -1))
                self._log_rows += take
        self._log_blocks = len(ep.blocks)
        return truncated or ep.n_steps > capacity

    def _write_reply(self, seq: int, reply: Reply, truncated: bool) -> None:
        values = dict(seq=seq, episode_id=reply.episode_id, index=reply.index, flag=int(reply.flag),
                      reward=reply.reward, n_steps=reply.n_steps, episode_done=int(reply.episode_done),
                      machine_state=int(reply.machine_state), log_rows=self._log_rows,
                      log_truncated=int(truncated), pad=0, message=reply.message.encode()[:MESSAGE_BYTES])
        REPLY_STRUCT.pack_into(self.channel.mm, self._reply_offset, *[values[n] for n in REPLY.names])
        self.blocks.reply_state[:] = reply.state

    def close(self) -> None:
        """Mark the channel closed and remove its objects."""
        if self.blocks.header is not None:
            self.blocks.header["status"] = 2
        self.blocks.release()
        self.channel.close()
