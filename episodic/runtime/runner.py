"""The in-process runner: a task on a robot in MuJoCo, the episode state machine and the
HDF5 run log, behind one ``send(command) -> Reply`` call (what the bridge serves).

    with Runner(make_task("reach"), log="runs/reach.h5", seed=0) as runner:
        runner.send(StartCommand(episode_id=1, max_commands=1))
        reply = runner.send(TrajectoryCommand(1, 1, 1, q))
"""
from __future__ import annotations

import ctypes
import dataclasses
import datetime
import functools
import logging
import os
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from episodic.interface.columns import step_widths
from episodic.interface.commands import (
    STEP_MEMORY,
    Command,
    GainsCommand,
    Limits,
    MalformedCommand,
    TrajectoryCommand,
    most_steps,
)
from episodic.interface.robot import Robot, load_robot
from episodic.interface.sender import Sender
from episodic.interface.vocabulary import Flag, Reply
from episodic.logs import RunLog
from episodic.logs.episode import EpisodeBuffer
from episodic.logs.layout import software_versions
from episodic.runtime.backend import Backend, DriverBackend, JointDriver
from episodic.runtime.machine import HELD_BLOCK, INTERRUPTED_MESSAGE, EpisodeMachine
from episodic.runtime.pacing import Pacer
from episodic.runtime.scene import Scene
from episodic.runtime.simulation import Simulation
from episodic.runtime.startable import build_startable_scene
from episodic.task import Task, task_source

MODES = ("blocking", "realtime")
# share of the time left before the next tick that a paced step may spend writing queued log
# pieces (at least one piece is written when any is queued, so finished episodes reach the disk
# even while the learner leaves the robot no idle tick; the rest is the margin for a piece that
# takes longer than the last one did)
TICK_LOG_SHARE = 0.5
_log = logging.getLogger("episodic.runtime.runner")


# glibc's malloc arenas a process with a log writer thread may have (mallopt M_ARENA_MAX, -8 in
# glibc's malloc.h; default 8 per core): with one per thread, the memory the writer thread frees
# stays spread over arenas and a serving runner's resident memory rose about 0.4 to 0.8 kB per
# episode; with two it stays flat (benchmarks/soak.py). MALLOC_ARENA_MAX in the environment wins.
MALLOC_ARENAS = 2
M_ARENA_MAX = -8
STREAM_BYTES = 4 << 20  # bytes of a running episode's steps held before they go to the log (Runner._bound_memory)


def few_malloc_arenas() -> None:
    """Hold glibc's malloc to MALLOC_ARENAS arenas from now on (for a process whose log writer
    thread would otherwise take an arena of its own), unless MALLOC_ARENA_MAX is set; nothing
    where the C library has no mallopt (not glibc)."""
    mallopt = getattr(ctypes.CDLL(None), "mallopt", None)
    if mallopt is not None and "MALLOC_ARENA_MAX" not in os.environ:
        mallopt(M_ARENA_MAX, MALLOC_ARENAS)


class StepCursor(NamedTuple):
    """How far a reader has read the per-step blocks of an episode (see ``Runner.steps_since``)."""

    episode: int = -1  # sequence number of the episode
    blocks: int = 0    # blocks of it read


class Runner(Sender):
    """Episodes of ``task`` (a :class:`episodic.task.Task`, e.g. ``make_task("reach")``) on
    ``robot`` (a Robot or the name of a folder under robots/).

    ``log``: HDF5 file for the run (None keeps episodes in memory only, in ``episodes``); a new
    file: an existing one is refused (episodic.logs.LogError) unless ``overwrite``. Finished
    episodes are written while the run goes on (blocking mode: on a writer thread while the
    next episode runs; realtime mode: in the spare time of the ticks); ``close`` waits for them.
    An episode the disk has no room for is named in the message of the reply that ended it, a
    write that fails part-way (e.g. the disk filled meanwhile) in a later reply.
    ``seed``: the run's seed; episode k's random generator is seeded with (seed, k).
    ``mode``: "blocking" (time stops between commands; an episode depends only on its own
    commands, the task, the seed and the software versions: each starts from the exact start
    state, see episodic.runtime.machine) or "realtime" (the simulation is paced to the wall clock and
    the robot holds while the learner is silent: the stand-in for a real robot).
    ``driver(scene)``: build the JointDriver of a robot driven tick by tick (episodic.runtime.backend);
    the run is then in realtime mode.

    Memory: with a log and episodes not kept, a running episode's steps go to the log once it
    holds ``stream_bytes`` of them (STREAM_BYTES), before the next command runs (in either mode;
    realtime: also while the robot holds). Otherwise (no log, or ``keep_episodes``) they stay in
    memory, bounded by ``limits.max_held_steps`` control steps, the running episode's and the
    kept ``episodes``' together: the oldest kept episodes are let go first (said once on the
    logger), and a command that could take the running episode alone past the bound is refused
    with Flag.INVALID_PAYLOAD and a message (the episode ends; realtime: a silent learner's hold
    that reaches it ends the episode with Flag.TIMEOUT).

    Finished episodes: each goes, in the thread that ended it, to the kept ``episodes``, the log
    and then whatever ``subscribe`` added, in that order; an episode run elsewhere (a batch's,
    episodic.tools.batch) joins the run through ``append_episode``, a command refused outside an
    episode is noted by ``record_refusal``. ``episodes_started``, ``episodes_finished``,
    ``refusals`` and ``batches`` count them.
    """

    def __init__(self, task: Task, robot: Robot | str = "wam", *, log: str | Path | None = None, seed: int = 0,
                 limits: Limits = Limits(), keep_episodes: bool | None = None, mode: str = "blocking",
                 driver: Callable[[Scene], JointDriver] | None = None, overwrite: bool = False):
        if mode not in MODES:
            raise ValueError(f"unknown mode '{mode}'; use one of {', '.join(MODES)}")
        if not isinstance(task, Task):
            raise TypeError(f"Runner takes a Task object, got {task!r}; build one with "
                            f"episodic.tasks.make_task(name, params)")
        super().__init__()
        self.mode = "realtime" if driver is not None else mode
        self.robot = load_robot(robot) if isinstance(robot, str) else robot
        self.task = task
        self.scene = build_startable_scene(self.robot, self.task)
        self.sim: Backend
        if driver is not None:
            self.sim = DriverBackend(self.scene, driver(self.scene), self._between_ticks)
        else:
            self.sim = Simulation(self.scene, Pacer(self.robot.control_dt), self._between_ticks) \
                if mode == "realtime" else Simulation(self.scene)
        self.n_dofs, self.control_rate = self.robot.n_dofs, self.robot.control_rate
        self.state_names = tuple(task.columns)
        self.seed = int(seed)
        self.limits = limits
        self.keep_episodes = log is None if keep_episodes is None else keep_episodes
        self.episodes: list[EpisodeBuffer] = []
        self._kept_steps = 0  # control steps of the kept episodes
        self._let_go = 0      # kept episodes let go to stay within limits.max_held_steps
        self.stream_bytes = STREAM_BYTES
        self._seen_blocks = 0  # blocks of the running episode when its memory was last bounded (``idle``)
        writer = "ticks" if self.mode == "realtime" else "thread"  # episodic.logs.RunLog
        if log is not None and writer == "thread":
            few_malloc_arenas()
        self.log = RunLog(log, self.metadata(), writer, overwrite) if log is not None else None
        self._subscribers: list[Callable[[EpisodeBuffer], object]] = []  # what they return is ignored
        if self.keep_episodes:
            self.subscribe(self._keep)
        if self.log is not None:
            self.subscribe(self.log.write_episode)
        self._diverted: list[EpisodeBuffer] | None = None  # where a replay's episodes go instead
        self._finished = self._refused = self._batches = 0
        self.machine = self._new_machine()
        self._built_state = self.sim.get_state() if self.mode == "blocking" else None

    def _new_machine(self) -> EpisodeMachine:
        return EpisodeMachine(self.scene, self.sim, self.task, self.seed, self.limits,
                              on_episode=self._episode_done, on_reject=self.record_refusal)

    def start_afresh(self) -> None:
        """Forget the run so far (blocking mode): a new episode machine, the simulation as it
        was when this runner was built and the counters at 0, so the next episode runs exactly as
        the first one of a new runner would (episodic.tools.batch does this between episodes).
        The log, the kept episodes and the subscribers stay as they are."""
        if self._built_state is None:
            raise RuntimeError("only a blocking simulation can start afresh; a robot cannot go back in time")
        self.machine = self._new_machine()
        self._finished = self._refused = self._batches = 0
        self.sim.set_state(self._built_state)

    def metadata(self) -> dict[str, Any]:
        """What a log records about the run (enough to rebuild this runner for replay)."""
        return {
            "task": self.task.name, "task_params": self.task.params(), "robot": self.robot.name,
            # the task class's "module:Class" spec and the package providing it (episodic.tasks.logged_task)
            "task_source": task_source(type(self.task)).as_dict(),
            "robot_settings": self.robot.settings_dict(), "mode": self.mode, "seed": self.seed,
            # how each episode's motion starts (episodic.runtime.machine): "exact" (blocking simulation,
            # the exact start state after the go-to-start) or "reached" (where the go-to-start ended)
            "start": "exact" if self.mode == "blocking" else "reached",
            "control_rate": self.robot.control_rate, "timestep": self.scene.model.opt.timestep,
            "substeps": self.scene.substeps, "state_columns": list(self.task.columns),
            "limits": dict(self.limits.__dict__), "versions": software_versions(),
            "created": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
            "model_xml": self.scene.xml,
        }

    # -- commands ------------------------------------------------------------
    def _deliver(self, command: Command | MalformedCommand) -> Reply:
        """Run one command; never raises on any input (the reply's flag says what went wrong, its
        message also what could not be logged since the previous reply)."""
        ep = self.machine.episode
        if ep is not None and isinstance(command, (TrajectoryCommand, GainsCommand)) \
                and command.episode_id == ep.episode_id:
            over = self._bound_memory(most_steps([command], self.control_rate, self.limits))
            if over:
                self.machine.abort(Flag.INVALID_PAYLOAD, over)  # the command is refused with this message
        reply = self.machine.handle(command)
        lost = self.log.pop_failures() if self.log is not None else []
        if isinstance(self.sim, DriverBackend) and (note := self.sim.note()):
            lost.append(note)  # what the robot's driver (e.g. its network link) suffered meanwhile
        if not lost:
            return reply
        return dataclasses.replace(reply, message="; ".join([reply.message, *lost] if reply.message else lost))

    @property
    def streams(self) -> bool:
        """Whether a running episode's steps go to the log as it runs (a log, episodes not kept)."""
        return self.log is not None and not self.keep_episodes

    def _bound_memory(self, more: int = 0) -> str:
        """Keep what the runner holds of the running episode within bounds before ``more``
        control steps may run (the most a command can run, episodic.interface.commands.most_steps):
        a streaming runner hands its held steps to the log once they pass ``stream_bytes`` (the
        reply to the last command has carried them), so it holds at most that and one command's
        steps, however long the episode; any other lets kept episodes go, oldest first, until they
        and the running episode's steps and ``more`` fit in ``limits.max_held_steps``. Returns why
        the running episode cannot take ``more`` steps, or "" when it can."""
        ep = self.machine.episode
        if ep is None:
            return ""
        self._seen_blocks = len(ep.blocks)
        if self.streams:
            assert self.log is not None
            if ep.held_bytes > self.stream_bytes:
                self.log.write_steps(ep)
            return ""
        held, cap = ep.held_steps, self.limits.max_held_steps
        if held + more <= cap:
            self._let_go_kept(cap - held - more)
            return ""
        why = "it keeps its episodes" if self.log is not None else "it has no log to stream them to"
        return (f"the runner holds an episode's steps in memory ({why}): {held:,} control steps held and up to "
                f"{more:,} more for this command would pass its limit of {cap:,} (max_held_steps, about "
                f"{cap * STEP_MEMORY / 1e9:.1f} GB); end the episode sooner (fewer or shorter segments and "
                f"wait_times), or log the run without keeping episodes (episodic serve --log) so that its steps "
                f"go to the file as it runs")

    def _keep(self, ep: EpisodeBuffer) -> None:
        """Keep a finished episode in ``episodes``, letting the oldest go beyond ``limits.max_held_steps``."""
        self.episodes.append(ep)
        self._kept_steps += ep.n_steps
        self._let_go_kept(self.limits.max_held_steps, keep=1)

    def _let_go_kept(self, room: int, keep: int = 0) -> None:
        """Let kept episodes go, oldest first, until their steps fit in ``room`` control steps
        or ``keep`` are left."""
        while len(self.episodes) > keep and self._kept_steps > max(room, 0):
            gone = self.episodes.pop(0)
            self._kept_steps -= gone.n_steps
            self._let_go += 1
            if self._let_go == 1:
                _log.warning("letting kept episodes go, oldest first (episode %d now), so that the runner holds at "
                             "most %d control steps in memory (Limits.max_held_steps); log the run to keep them all",
                             gone.number, self.limits.max_held_steps)

    def abort(self, flag: Flag, message: str) -> None:
        """Abort the running episode (e.g. a silent learner: Flag.TIMEOUT)."""
        self.machine.abort(flag, message)

    # -- what a serving loop needs --------------------------------------------
    @property
    def paced(self) -> bool:
        """Whether the robot runs in wall-clock time (realtime mode: the loop must keep ticking)."""
        return self.sim.pacer is not None

    def idle(self, n_steps: int = 1) -> None:
        """Hold the robot for n_steps control steps while the learner is silent (non-blocking
        mode; the steps are logged in the running episode, and bounded in memory as a command's
        are: a hold whose next block of HELD_BLOCK s would pass ``limits.max_held_steps`` ends the
        episode with Flag.TIMEOUT)."""
        self.machine.idle(n_steps)
        ep = self.machine.episode
        if ep is not None and len(ep.blocks) != self._seen_blocks \
                and self._bound_memory(int(np.ceil(HELD_BLOCK * self.control_rate))):
            self.abort(Flag.TIMEOUT, f"the learner was silent while the runner held episode {ep.episode_id}'s "
                                     f"{ep.held_steps:,} control steps in memory, its limit (max_held_steps); "
                                     f"send commands sooner, or log the run (episodic serve --log)")

    @property
    def running_episode(self) -> int | None:
        """The id of the episode running now, or None."""
        return None if self.machine.episode is None else self.machine.episode.episode_id

    def _between_ticks(self) -> None:
        """After each paced control step (simulated or driven): write queued log pieces for up to
        TICK_LOG_SHARE of the time left before the next tick (s)."""
        pacer = self.sim.pacer
        if self.log is not None and pacer is not None:
            self.log.work(TICK_LOG_SHARE * pacer.time_left())

    def interrupt(self) -> None:
        """Stop what the robot is doing at the next tick (safe to call from a signal handler): a
        paced go-to-start or segment in progress, and any later one, ends its episode with
        Flag.INTERRUPTED, its steps so far logged. A blocking run finishes the command it runs."""
        self.machine.interrupted = True

    def steps_since(self, cursor: StepCursor) -> tuple[StepCursor, list[dict[str, np.ndarray]]]:
        """The per-step blocks (column name -> values) the current or last episode logged after
        ``cursor``, and the cursor after them; when that is another episode than the cursor's,
        the blocks start at its first step."""
        ep = self.machine.last_episode
        if ep is None:
            return cursor, []
        start = max(cursor.blocks - ep.streamed_blocks, 0) if cursor.episode == ep.number else 0
        return StepCursor(ep.number, ep.streamed_blocks + len(ep.blocks)), ep.blocks[start:]

    def get_episode(self, *, copy: bool = True) -> dict[str, np.ndarray]:
        """As ``Sender.get_episode``; the columns are always fresh arrays (the episode's per-step
        blocks joined), whatever ``copy`` says."""
        ep = self.machine.last_episode
        widths = step_widths(self.n_dofs, len(self.state_names))
        steps = ep.steps() if ep is not None and ep.blocks else {
            name: np.zeros((0, width))[:, 0] if width == 1 else np.zeros((0, width)) for name, width in widths}
        if ep is not None and ep.streamed_blocks and self.log is not None:  # the first steps are in the log
            streamed = self.log.read_streamed(ep.number, ep.streamed_steps)
            steps = {k: np.concatenate([v, steps[k].astype(v.dtype)]) for k, v in streamed.items()} or steps
        for i, name in enumerate(self.state_names):
            steps[name] = steps["task_state"][:, i]
        return steps

    # -- replay --------------------------------------------------------------
    def replay_episode(self, number: int, initial_state: np.ndarray, commands: Iterable[Command],
                       end: Flag = Flag.OK) -> list[EpisodeBuffer]:
        """Run recorded ``commands`` as episode ``number`` from the integration state
        ``initial_state``, end a still running episode with ``end``, and return the episodes
        that produced (one, when the replay matches the recording)."""
        produced: list[EpisodeBuffer] = []
        self._diverted = produced  # not the run's: neither counted nor handed to the subscribers
        try:
            self.sim.set_state(initial_state)
            self.machine.episodes_started = number
            for command in commands:
                self.send(command)
            self.machine.abort(end, "replayed abort")
        finally:
            self._diverted = None
        return produced

    # -- finished episodes -------------------------------------------------------
    def subscribe(self, callback: Callable[[EpisodeBuffer], object]) -> Callable[[], None]:
        """Call ``callback(episode)`` for every episode the run finishes or appends from now on
        (after the kept episodes and the log, in the order subscribed, in the thread that ended
        it); returns the function that ends the subscription. A callback that raises is logged
        and the run goes on: the other subscribers still get the episode."""
        subscription = functools.partial(callback)  # its own object: one callback subscribed twice is two
        self._subscribers.append(subscription)

        def unsubscribe() -> None:
            if subscription in self._subscribers:
                self._subscribers.remove(subscription)
        return unsubscribe

    def append_episode(self, episode: EpisodeBuffer, batch: int = -1, batch_position: int = -1) -> EpisodeBuffer:
        """Add ``episode``, run elsewhere (e.g. by a batch's worker), to the run as its next
        episode: numbered so, with ``batch`` (the batch's number in the run, -1: none) and its
        ``batch_position`` in it, and handed on as a finished episode of this runner's
        (``subscribe``); returns it as added. RuntimeError while an episode runs here: end it
        first (``abort``)."""
        if self.machine.episode is not None:
            raise RuntimeError(f"episode {self.machine.episode.episode_id} is running; end it (abort) before "
                               f"adding an episode run elsewhere")
        added = dataclasses.replace(episode, number=self.machine.episodes_started, batch=batch,
                                    batch_position=batch_position)
        self.machine.episodes_started += 1
        self._episode_done(added)
        return added

    def record_refusal(self, command: Any, flag: Flag) -> None:
        """Note a command (possibly malformed) refused with ``flag`` while no episode ran: counted,
        and a row of the log's /rejected table."""
        self._refused += 1
        if self.log is not None:
            self.log.reject(getattr(command, "episode_id", -1), getattr(command, "index", -1), int(flag))

    def begin_batch(self) -> int:
        """Count a batch of episodes handed to this runner (episodic.tools.batch.evaluate_into) and
        return its number in the run (0, 1, ...)."""
        self._batches += 1
        return self._batches - 1

    @property
    def episodes_started(self) -> int:
        """Episodes started or appended so far (the number the next one gets)."""
        return self.machine.episodes_started

    @property
    def episodes_finished(self) -> int:
        """Episodes finished or appended so far (each handed to the subscribers)."""
        return self._finished

    @property
    def refusals(self) -> int:
        """Commands refused while no episode ran (``record_refusal``)."""
        return self._refused

    @property
    def batches(self) -> int:
        """Batches of episodes handed to this runner so far (``begin_batch``)."""
        return self._batches

    def _episode_done(self, ep: EpisodeBuffer) -> None:
        """A finished episode: to the replay that asked for it, else to the subscribers."""
        if self._diverted is not None:
            self._diverted.append(ep)
            return
        self._finished += 1
        for callback in list(self._subscribers):
            try:
                callback(ep)
            except Exception:  # noqa: BLE001 - a report of an episode never ends the run
                _log.exception("a subscriber to finished episodes failed on episode %d", ep.number)

    # -- life ----------------------------------------------------------------
    def close(self) -> None:
        """End a running episode with Flag.INTERRUPTED (so its steps are kept) and close the log."""
        self.machine.abort(Flag.INTERRUPTED, INTERRUPTED_MESSAGE)
        if self.log is not None and self.sim.pacer is not None:
            self.log.set_attrs(self.sim.pacer.timing().as_attrs())
        if self.log is not None:
            self.log.close()

    def __enter__(self) -> Runner:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
