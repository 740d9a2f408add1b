"""The runner's end of a channel: waits for commands, runs them, answers, and keeps the
episode-log block up to date; evaluates a batch of episodes with the evaluator it was given
and fetches their logs. Nothing a client writes can make it raise."""
from __future__ import annotations

import gc
import logging
import threading
import time
from collections.abc import Callable, Sequence

import numpy as np
import posix_ipc

from episodic.bridge.batches import decode_batch, encode_results
from episodic.bridge.blocks import Blocks
from episodic.bridge.channel import DEFAULT_CHANNEL, Channel, locked, pid_alive
from episodic.bridge.codec import ReplyBlock, decode_command, encode_reply, read_command_fields
from episodic.bridge.layout import MAGIC, VERSION, CommandFields, Layout, Sizes
from episodic.interface.columns import step_widths
from episodic.interface.commands import Command, MalformedCommand
from episodic.interface.vocabulary import CommandError, EpisodeResult, Flag, Kind, Reply
from episodic.runtime.runner import Runner, StepCursor

log = logging.getLogger("episodic.serve")
# share of a control period that must be left before the next tick for a collection of the young
# objects (the garbage collector's two younger generations: about 0.1-0.5 ms; see hold)
COLLECT_ROOM = 0.5
# share of a control period a paced runner keeps before the next tick when it waits for a command:
# it waits until then, so a command has at least this long to prepare its first step (0.2-0.5 ms),
# and a held tick as long to begin (its own work and the wake-up's lateness, 0.1-0.3 ms each)
COMMAND_ROOM = 0.5
SQUEEZED_TICKS = 2  # ticks in a row with less than COMMAND_ROOM left before a waiting command is taken anyway
WATCH_POLL = 0.05  # s between looks whether the learner of a running paced command still lives
# evaluates a batch: (episodes, keep_steps) -> one result per episode, in order (episodic.tools.batch)
BatchEvaluator = Callable[[Sequence[Sequence[Command | MalformedCommand]], bool], list[EpisodeResult]]
NO_BATCH = ("this runner evaluates no batches (a realtime runner cannot run episodes side by side); "
            "send the episodes one by one, or serve a blocking simulation")


def hold(runner: Runner) -> None:
    """One tick of a paced runner while its learner is silent: the robot holds for a control step
    (the runner writes queued log pieces after it, Runner._between_ticks), then, when the garbage
    collector's youngest generation is due (its threshold, gc.get_threshold) and COLLECT_ROOM of
    the period is left before the next tick, a collection of the two younger generations. A
    paced ``serve`` turns automatic collection off, so that no collection lands in the middle of
    a tick's work; this is where collections happen instead (the oldest generation, frozen at
    start-up, is never collected while paced: a prompt learner's episodes leave about two cyclic
    objects each, benchmarks/realtime.py's memory line)."""
    runner.idle(1)
    pacer = runner.sim.pacer
    if gc.get_count()[0] >= gc.get_threshold()[0] and pacer is not None \
            and pacer.time_left() > COLLECT_ROOM * pacer.dt:
        gc.collect(1)


class Endpoint:
    """Serve ``runner`` on ``channel``. ``learner_timeout`` s: a running episode whose learner
    stays silent that long is aborted with Flag.TIMEOUT. A running episode whose learner's
    process has died (the ``client_pid`` of its last command) is ended with Flag.LEARNER_GONE at
    once: while the runner waits (within a poll), before a command of another client runs, and,
    for a paced runner, during a go-to-start or segment at the next tick (within WATCH_POLL s), the
    robot holding the posture reached.

    ``batch``: what evaluates a batch command's episodes (None: batches are refused with
    Flag.INVALID_PAYLOAD); ``batch_sizes``: (max_batch, max_batch_commands, max_batch_values),
    the batch block's sizes, written in the header."""

    def __init__(self, runner: Runner, channel: str = DEFAULT_CHANNEL, learner_timeout: float = 10.0,
                 max_log_steps: int = 60_000, batch: BatchEvaluator | None = None,
                 batch_sizes: tuple[int, int, int] | None = None):
        self.runner = runner
        self.learner_timeout = learner_timeout
        self.batch = batch
        n_state = len(runner.state_names)
        sizes = Sizes(runner.n_dofs, runner.limits.max_segment_steps, max_log_steps, runner.limits.max_context,
                      runner.state_names, step_widths(runner.n_dofs, n_state), runner.control_rate,
                      *(batch_sizes or ()))
        self.channel = Channel.create(channel, Layout(sizes))
        self.blocks = Blocks(self.channel.mm, self.channel.layout)
        # each log-block column as the per-step blocks hold it: (max_log_steps,) or (max_log_steps, width)
        self._log_columns = {name: view[:, 0] if view.shape[1] == 1 else view for name, view in self.blocks.log.items()}
        self._cursor = StepCursor()
        self._log_rows = 0
        self._truncated = False  # the episode in the log block outgrew it
        self._last_command = time.monotonic()
        self._learner_pid = 0
        self._last_taken: tuple[int, int] | None = None  # (seq, client_pid) of the last command read
        self._batches = 0  # batches evaluated
        self._batch_logs: list[dict[str, np.ndarray]] = []  # the last batch's per-step logs, if kept
        # a paced runner's watch on the learner of the command it runs (_watch)
        self._watched = 0  # the pid watched now (0: none)
        self._watch_lock = threading.Lock()
        self._closing = threading.Event()
        self._watcher = threading.Thread(target=self._watch, name="episodic-learner-watch", daemon=True)
        if runner.paced:
            self._watcher.start()
        self.blocks.header["status"] = 1

    # -- loop ----------------------------------------------------------------
    def serve(self, stop: Callable[[], bool], poll: float = 0.1) -> None:
        """Answer commands until ``stop()`` is true (checked at least every ``poll`` s). A paced
        (real-time) runner ticks instead: the robot holds one control step at a time, and a
        command that arrives between two ticks is taken at once, its first step at the next tick."""
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
        """The paced loop: while more than COMMAND_ROOM of the period is left before the next tick,
        wait for a command until only that is left and take one at once when it arrives, its first
        step at that tick (taken right after a held tick and its log work, its preparation often
        had too little of the period left); then ``hold`` (after SQUEEZED_TICKS ticks in a row
        without that room, a command waiting is taken however little is left)."""
        dt = 1.0 / self.runner.control_rate
        pacer = self.runner.sim.pacer
        assert pacer is not None, "a paced runner has a pacer"
        check_every = max(int(poll / dt), 1)
        tick = squeezed = 0
        while not stop():
            left = pacer.time_left() - COMMAND_ROOM * dt
            if left > 0 or squeezed >= SQUEEZED_TICKS:
                squeezed = 0
                try:
                    self.channel.cmd_ready.acquire(max(left, 0.0))
                except posix_ipc.BusyError:
                    pass
                except posix_ipc.SignalError:
                    continue
                else:
                    self.serve_one()
                    continue
            else:
                squeezed += 1
            hold(self.runner)
            tick += 1
            if tick % check_every == 0:
                self._check_learner()

    def serve_one(self) -> Reply | None:
        """Read the command block, mark it taken, run it, write the reply and the new log rows, post
        'reply ready' (None, and no reply, when the block holds the command read last: posted twice)."""
        with locked(self.channel.lock):
            c = read_command_fields(self.blocks)
            self.blocks.mark_taken(c.seq)  # a client may write its next command now
            if (c.seq, c.client_pid) == self._last_taken:
                return None  # a second post of a block already read (and answered)
            self._last_taken = (c.seq, c.client_pid)
            kind = c.kind if (c.magic, c.version) == (MAGIC, VERSION) else None  # else refused below
            batch = decode_batch(self.blocks) if kind == Kind.BATCH else None
            command = None if kind in (Kind.BATCH, Kind.BATCH_LOG) else decode_command(self.blocks, c)
        if c.client_pid != self._learner_pid:
            self._check_learner()  # a dead learner's episode ends as such, not as this command would end it
            self._learner_pid = c.client_pid
        if batch is not None:
            reply = self._evaluate(c, batch)
        elif command is not None:
            reply = self._run(command, c.client_pid)
        else:  # a batch's log
            reply = self._reply_to(c, Flag.OK)
        with locked(self.channel.lock):
            try:
                if kind == Kind.BATCH_LOG:
                    reply, truncated = self._copy_batch_log(c, reply)
                elif kind == Kind.BATCH:
                    truncated = self._truncated
                    if reply.flag == Flag.OK:
                        encode_results(self.blocks, self._results, self._batches - 1, self._first_episode)
                else:
                    truncated = self._update_log()
                encode_reply(self.blocks, ReplyBlock(c.seq, c.kind, reply, self._log_rows, truncated))
            except Exception as exc:  # noqa: BLE001 - the learner gets an answer whatever happens
                log.exception("could not write the reply")
                reply = Reply(reply.episode_id, reply.index, Flag.INTERNAL_ERROR, 0.0,
                              np.full(len(self.runner.state_names), np.nan), 0, True,
                              f"the runner could not write its reply ({type(exc).__name__}: {exc})",
                              posture=reply.posture, episode_return=reply.episode_return)
                encode_reply(self.blocks, ReplyBlock(c.seq, c.kind, reply, self._log_rows, False))
        self._last_command = time.monotonic()
        self.channel.reply_ready.release()
        return reply

    def _run(self, command: Command | MalformedCommand, learner: int) -> Reply:
        """Run ``command``; a paced runner meanwhile watches its ``learner`` (a pid; 0: none)."""
        if not self.runner.paced or learner <= 0:
            return self.runner.send(command)
        with self._watch_lock:
            self._watched = learner
        try:
            return self.runner.send(command)
        finally:
            with self._watch_lock:
                self._watched = 0
                self.runner.machine.halt = None

    def _watch(self) -> None:
        """The watch thread of a paced runner: while a command runs, every WATCH_POLL s, whether its
        learner lives; when it has died, the motion stops at the next tick and the episode ends with
        Flag.LEARNER_GONE (EpisodeMachine.halt)."""
        while not self._closing.wait(WATCH_POLL):
            with self._watch_lock:
                pid = self._watched
                if pid and not pid_alive(pid):
                    self.runner.machine.halt = (Flag.LEARNER_GONE, f"the learner process {pid} died")
                    self._watched = 0

    # -- batches -------------------------------------------------------------------
    def _reply_to(self, c: CommandFields, flag: Flag, message: str = "", n_steps: int = 0) -> Reply:
        """A reply to a batch or batch-log command: its episode id and index echoed, no task state
        and no posture (NaN): the runner's own episode is where it was. No success and a return of
        0: each episode's are in the batch's results."""
        return Reply(c.episode_id, c.index, flag, 0.0, np.full(len(self.runner.state_names), np.nan), n_steps,
                     True, message, self.runner.machine.state)

    def _evaluate(self, c: CommandFields, batch) -> Reply:
        """Evaluate a batch command's episodes (results kept for the reply block)."""
        if isinstance(batch, str):
            return self._reply_to(c, Flag.INVALID_PAYLOAD, f"malformed batch: {batch}")
        if self.batch is None:
            return self._reply_to(c, Flag.INVALID_PAYLOAD, NO_BATCH)
        episodes, keep_logs = batch
        self._first_episode = self.runner.episodes_started
        try:
            self._results = self.batch(episodes, keep_logs)
        except CommandError as exc:  # e.g. more steps than a batch may hold (BatchTooLarge)
            return self._reply_to(c, Flag.INVALID_PAYLOAD, str(exc))
        except Exception as exc:  # noqa: BLE001 - the learner gets an answer whatever happens
            log.exception("the batch failed")
            return self._reply_to(c, Flag.INTERNAL_ERROR,
                                  f"the runner failed on the batch ({type(exc).__name__}: {exc})")
        self._batches += 1
        self._batch_logs = [r.steps or {} for r in self._results] if keep_logs else []
        return self._reply_to(c, Flag.OK, n_steps=sum(r.n_steps for r in self._results))

    def _copy_batch_log(self, c: CommandFields, reply: Reply) -> tuple[Reply, bool]:
        """Put the per-step log of episode ``c.index`` of the last batch in the log block; the
        block then holds no episode of the runner's own (the next command's log starts afresh)."""
        position = c.index
        if not 0 <= position < len(self._batch_logs):
            why = (f"it has {len(self._batch_logs)} episodes" if self._batch_logs
                   else "its logs were not kept (ask for them with the batch)")
            return self._reply_to(c, Flag.INVALID_PAYLOAD, f"no log of episode {position} of the last batch: "
                                                            f"{why}"), False
        steps = self._batch_logs[position]  # {} for an episode that never started: no rows
        n = len(steps["time"]) if steps else 0
        take = min(n, self.channel.layout.sizes.max_log_steps)
        for name, column in self._log_columns.items() if take else ():
            column[:take] = steps[name][:take]
        self._cursor, self._log_rows, self._truncated = StepCursor(), take, False
        return reply, take < n

    def _check_learner(self) -> None:
        """End the running episode, if any, when its learner is gone: Flag.LEARNER_GONE when the
        process that sent its last command has died, Flag.TIMEOUT when it has been silent longer
        than the learner timeout."""
        episode_id = self.runner.running_episode
        if episode_id is None:
            return
        silent = time.monotonic() - self._last_command
        if self._learner_pid > 0 and not pid_alive(self._learner_pid):
            flag, message = Flag.LEARNER_GONE, f"the learner process {self._learner_pid} died"
        elif silent > self.learner_timeout:
            flag, message = Flag.TIMEOUT, f"no command for {silent:.1f} s (learner timeout {self.learner_timeout} s)"
        else:
            return
        log.warning("episode %d aborted: %s", episode_id, message)
        self.runner.abort(flag, message)
        with locked(self.channel.lock):
            self._update_log()

    # -- the log block ---------------------------------------------------------
    def _update_log(self) -> bool:
        """Copy the steps the current (or last) episode added since the previous call into the log
        block, each piece of each column straight into its rows (no joined copy in between); True
        when the episode has outgrown the log block."""
        cursor, blocks = self.runner.steps_since(self._cursor)
        if cursor.episode != self._cursor.episode:
            self._log_rows, self._truncated = 0, False
        self._cursor = cursor
        at, end, columns = self._log_rows, self.channel.layout.sizes.max_log_steps, self._log_columns
        for block in blocks:
            n = len(block["time"])
            take = min(n, end - at)
            self._truncated |= take < n
            if take > 0:
                for name, column in columns.items():
                    column[at:at + take] = block[name][:take]
                at += take
        self._log_rows = at
        return self._truncated

    def close(self) -> None:
        """Mark the channel closed and remove its objects."""
        self._closing.set()
        if self._watcher.is_alive():
            self._watcher.join()
        if self.blocks.header is not None:
            self.blocks.header["status"] = 2
        self._log_columns = {}
        self.blocks.release()
        self.channel.close()
