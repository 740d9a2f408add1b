"""The learner's end of a channel, in Python.

    from episodic.bridge import Client
    with Client("default") as runner:
        start = runner.start_episode(1, context=[0.5, 0.2, 1.5])
        reply = runner.send_trajectory(q)          # q: (n_samples, n_dofs) rad, q[0] near start.posture
        log = runner.get_episode()                 # {"q": (n_steps, n_dofs), ...}
        results = runner.evaluate(population)      # one EpisodeResult per episode (a list of commands)

Every Reply carries ``posture`` (n_dofs,) rad, the posture held after the command: after a
start the start posture reached, after a segment where the next one must start (within the
robot's max_start_jump, else DISCONTINUOUS); and ``episode_return``, the return of its
episode so far (the charge for an early end included: the log's return once the episode has
ended). The reply that ends an episode (``episode_done``) says how it ended in ``flag`` and
whether the task counts it as solved in ``success`` (True only there, and only with Flag.OK).

The calls are those of the in-process runner (episodic.interface.sender.Sender): a learner written
against ``Runner`` runs unchanged against a ``Client``.
"""
from __future__ import annotations

import dataclasses
import math
import os
import time
from collections.abc import Callable, Sequence
from functools import partial
from itertools import zip_longest

import numpy as np
import posix_ipc

from episodic.bridge.batches import decode_results, encode_batch, split
from episodic.bridge.blocks import Blocks
from episodic.bridge.channel import DEFAULT_CHANNEL, Channel, check_name, locked
from episodic.bridge.codec import command_parts, decode_reply, encode_command, encode_request
from episodic.bridge.layout import LayoutError
from episodic.interface.columns import step_widths
from episodic.interface.commands import Command, MalformedCommand
from episodic.interface.sender import Sender
from episodic.interface.vocabulary import EpisodeResult, Flag, Kind, Reply

POLL = 0.2  # s between checks that the runner is still alive (its lock) while waiting
TAKEN_POLL = 0.002  # s between looks whether the runner has taken the previous command


class ProtocolError(RuntimeError):
    """The runner speaks another protocol version, or answered something it should not have."""


class RunnerGone(TimeoutError):
    """The runner process died while the client waited for it."""


class BatchError(RuntimeError):
    """The runner refused a batch as a whole (or failed on it); the message says why."""


@dataclasses.dataclass(frozen=True)
class _Request:
    """What a reply must echo: a command's kind, index and episode id."""

    kind: int
    index: int
    episode_id: int = 0


def _same_parts(a: tuple[dict, dict[str, np.ndarray]], b: tuple[dict, dict[str, np.ndarray]]) -> bool:
    """Whether two commands' wire parts (codec.command_parts) are equal, arrays bit for bit."""
    return a[0] == b[0] and a[1].keys() == b[1].keys() and all(
        a[1][name].shape == b[1][name].shape and a[1][name].tobytes() == b[1][name].tobytes() for name in a[1])


class Client(Sender):
    """Attach once to a runner's channel (the only client on it while attached: a second one is
    refused with ChannelInUse); every call sends one command and waits for its reply.

    ``timeout`` s: longest wait for a reply (a 2 s segment in blocking mode takes milliseconds;
    a real robot takes its real duration). A command sent while the runner has not yet taken
    this client's previous one (that one timed out) waits for it within the same timeout.

    A command whose reply timed out may be sent again: the same command (same kind, episode id,
    index and contents) is not posted a second time, the call waits for the runner's reply to the
    one already sent (the runner runs it once, so the episode goes on; a second copy would be
    refused OUT_OF_ORDER and end it). A different command with that kind, episode id and index
    is refused with a ValueError; any other command is sent as usual.
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
        self.sizes = self._channel.layout.sizes
        columns = step_widths(self.sizes.n_dofs, len(self.sizes.state_names))
        if self.sizes.log_columns != columns:
            self._channel.close()
            got, want = next((g, w) for g, w in zip_longest(self.sizes.log_columns, columns) if g != w)
            raise ProtocolError(f"channel '{channel}': the header's log-column table has {got} (name, width) where "
                                f"this version has {want}; the channel is corrupt, or its runner is of another "
                                f"version of episodic (use matching versions)")
        self._blocks = Blocks(self._channel.mm, self._channel.layout)
        self.n_dofs, self.control_rate = self.sizes.n_dofs, self.sizes.control_rate
        self.state_names = self.sizes.state_names
        self.runner_pid = int(self._blocks.header["runner_pid"])
        self._seq = int.from_bytes(os.urandom(8), "little")  # this client's own numbers, no other's (the last posted)
        self._unanswered = False  # the last command posted got no reply: the runner may not have taken it
        self._posted: Command | MalformedCommand | _Request | None = None  # the last command posted
        self._log_rows = 0
        self._log_views = self._read_only_log()
        self._views: tuple[int, dict[str, np.ndarray]] = (-1, {})  # (rows, get_episode(copy=False)'s views)

    def _deliver(self, command: Command | MalformedCommand) -> Reply:
        deadline = time.monotonic() + self.timeout
        if self._resumes(command):
            return self._wait_reply(command, deadline)
        return self._exchange(command, lambda seq: encode_command(self._blocks, command, seq, os.getpid()), deadline)

    def _resumes(self, command: Command | MalformedCommand) -> bool:
        """Whether ``command`` is the episode command posted last, whose reply timed out (then its
        reply is waited for, the command not posted again); ValueError when it has that command's
        kind, episode id and index but other contents."""
        posted = self._posted
        if not self._unanswered or isinstance(posted, _Request) or posted is None or posted.kind == Kind.MALFORMED:
            return False
        if (command.kind, command.episode_id, command.index) != (posted.kind, posted.episode_id, posted.index):
            return False
        if command is posted or _same_parts(command_parts(self.sizes, command), command_parts(self.sizes, posted)):
            return True
        raise ValueError(f"{command.kind.name.lower()} command {command.index} of episode {command.episode_id} was "
                         f"sent already and its reply is still due (it timed out); the runner runs an index once: "
                         f"send that same command again to wait for its reply, or start a new episode")

    def _exchange(self, command: Command | MalformedCommand | _Request, write: Callable[[int], None],
                  deadline: float) -> Reply:
        """Write a command with ``write(seq)``, post it and wait for its reply until ``deadline``
        (time.monotonic() s)."""
        seq = (self._seq + 1) % 2**64
        self._write_when_taken(write, seq, deadline)
        self._seq, self._posted, self._unanswered = seq, command, True
        self._channel.cmd_ready.release()
        return self._wait_reply(command, deadline)

    def _write_when_taken(self, write: Callable[[int], None], seq: int, deadline: float) -> None:
        """Write the next command (``write(seq)``, under the lock) once the runner has taken this
        client's previous command out of the command block (when that one timed out, the runner may
        still be busy with it), so that no posted command is overwritten unread. A command that was
        answered was taken: then the block is not even looked at."""
        blocks = self._blocks
        while True:
            with locked(self._channel.lock):
                if not (self._unanswered and int(blocks.command["client_pid"]) == os.getpid()
                        and int(blocks.command["seq"]) != int(blocks.header["taken_seq"])):
                    write(seq)
                    return
            if not self._channel.runner_alive():
                raise RunnerGone(f"the runner of channel '{self.channel_name}' (pid {self.runner_pid}) "
                                 f"has exited")
            if time.monotonic() >= deadline:
                raise TimeoutError(f"the runner on channel '{self.channel_name}' has not taken this client's "
                                   f"previous command within {self.timeout} s (it is still busy with an "
                                   f"earlier one); this command was not sent")
            time.sleep(TAKEN_POLL)

    def _wait_reply(self, command: Command | MalformedCommand | _Request, deadline: float) -> Reply:
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                again = "" if isinstance(command, _Request) else (
                    "; send the same command again to wait on for its reply (the runner runs it once)")
                raise TimeoutError(f"the runner on channel '{self.channel_name}' did not answer within "
                                   f"{self.timeout} s{again}")
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
            self._unanswered = False
            self._log_rows = answer.log_rows
            got = (answer.kind, answer.reply.index, answer.reply.episode_id)
            if got != (int(command.kind), command.index, command.episode_id):
                raise ProtocolError(f"the reply to command {self._seq} on channel '{self.channel_name}' is for "
                                    f"kind {got[0]}, index {got[1]}, episode {got[2]}; expected kind "
                                    f"{int(command.kind)}, index {command.index}, episode {command.episode_id}")
            return answer.reply

    # -- batches ---------------------------------------------------------------------
    def evaluate(self, episodes: Sequence[Sequence[Command]], *, keep_steps: bool = False,
                 timeout: float | None = None) -> list[EpisodeResult]:
        """Evaluate a population: ``episodes``, each a list of command objects (a start, then its
        segments and gain sets), in as few batch commands as the runner's sizes allow (the header's
        max_batch, max_batch_commands, max_batch_values). One EpisodeResult per episode, in order,
        each bit-identical to the episode run alone on a fresh runner of the served task (the
        runner evaluates on its threads, `episodic serve --threads`, and logs every episode with
        its batch number). ``keep_steps``: also fetch each episode's per-step log (up to the
        channel's max_log_steps rows; afterwards ``get_episode`` returns the last one fetched).
        ``timeout`` s: longest wait for one batch (None: as long as the runner lives).
        ValueError when an episode is too large for a batch; BatchError when the runner refuses one."""
        out: list[EpisodeResult] = []
        for batch in split(self.sizes, episodes):
            deadline = math.inf if timeout is None else time.monotonic() + timeout
            request = _Request(Kind.BATCH, len(batch))
            reply = self._exchange(request, partial(self._write_batch, batch, keep_steps), deadline)
            if reply.flag != Flag.OK:
                raise BatchError(f"the runner on channel '{self.channel_name}' refused a batch of {len(batch)} "
                                 f"episodes: {reply.message}")
            with locked(self._channel.lock):
                results = decode_results(self._blocks, len(batch))
            if keep_steps:
                results = [dataclasses.replace(r, steps=self._batch_log(i)) for i, r in enumerate(results)]
            out += results
        return out

    def _write_batch(self, batch: list[list[Command]], keep_steps: bool, seq: int) -> None:
        encode_batch(self._blocks, batch, keep_steps)
        encode_request(self._blocks, Kind.BATCH, len(batch), seq, os.getpid())

    def _batch_log(self, position: int) -> dict[str, np.ndarray]:
        """The per-step log of episode ``position`` of the last batch."""
        request = _Request(Kind.BATCH_LOG, position)
        reply = self._exchange(request, lambda seq: encode_request(self._blocks, Kind.BATCH_LOG, position, seq,
                                                                   os.getpid()), time.monotonic() + self.timeout)
        if reply.flag != Flag.OK:
            raise BatchError(f"the runner on channel '{self.channel_name}' has no log of episode {position} of "
                             f"the batch: {reply.message}")
        return self.get_episode()

    def get_episode(self, *, copy: bool = True) -> dict[str, np.ndarray]:
        """The current or last episode's per-step log, as ``Sender.get_episode``. ``copy=False``
        returns read-only views into the channel's log block instead of copies (nothing is copied,
        however long the episode): they stay valid only until the next command, whose steps
        overwrite the block; copy what must outlive it."""
        rows = self._log_rows
        if not copy:
            if self._views[0] != rows:  # views of the first rows rows: the same for every episode of that length
                self._views = rows, self._named({name: view[:rows] for name, view in self._log_views.items()})
            return dict(self._views[1])
        with locked(self._channel.lock):
            return self._named({name: view[:rows].copy() for name, view in self._log_views.items()})

    def _named(self, columns: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """``columns`` with each task state column under its own name as well."""
        for i, name in enumerate(self.state_names):
            columns[name] = columns["task_state"][:, i]
        return columns

    def _read_only_log(self) -> dict[str, np.ndarray]:
        """Read-only views of the whole log block, each column (max_log_steps,) or
        (max_log_steps, width) as ``get_episode`` returns it."""
        views = {name: view[:, 0] if view.shape[1] == 1 else view.view() for name, view in self._blocks.log.items()}
        for view in views.values():
            view.flags.writeable = False
        return views

    def close(self) -> None:
        self._log_views, self._views = {}, (-1, {})
        self._blocks.release()
        self._channel.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
