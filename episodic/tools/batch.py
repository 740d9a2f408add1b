"""Batch evaluation: a population of episodes evaluated on k threads, on worker processes or a
cluster through an executor, and optionally written to a run's log.

    from episodic.tools.batch import evaluate
    results = evaluate([swing_commands(robot, s) for s in swings], "ball_in_cup", threads=2)
    returns = [r.episode_return for r in results]

Each episode is a list of command objects (episodic.interface.commands) as a learner would send them: a
start command, then its segments and gain sets. Each thread evaluates its share of the episodes
on a Runner of its own (no log file); MuJoCo models and data are never shared between threads,
and MuJoCo releases the GIL while it steps. Runners are kept per process for the next batch of
the same setup (``RUNNERS``), so a worker builds its runners once.

Every episode is evaluated as the first episode of a fresh Runner (blocking simulation): before
it, the thread's runner starts afresh (``Runner.start_afresh``: a new episode machine, the
simulation as it was built), so an episode's result depends only on its own commands, the task, the robot
and the seed: bit-identical to running it alone in a fresh ``Runner(task, robot, seed=seed)``,
whatever the order of the batch, the number of threads, the executor and the episode ids in the
commands (the episode's random generator is seeded with (seed, 0), as in a fresh runner).

The commands of an episode are sent in order until one of them ends the episode (its reply's
``episode_done``: the last segment, or a refusal that aborts it); the rest are not sent. An
episode still running after its last command is ended with Flag.INTERRUPTED (BATCH_END_MESSAGE).

Beyond one process: ``executor`` is anything with ``submit(fn, *args)`` returning a future with
``result()`` (a ``concurrent.futures`` pool, a Dask ``Client.get_executor()``, a small adapter
for Ray). The population is cut into chunks of ``chunk_size`` episodes; each is sent as one
picklable ``Chunk`` (the task by name and parameters, the robot by name, the commands) to
``evaluate_chunk``, which evaluates it in the worker on ``threads`` threads. Each result carries
the worker's software versions, and results from other versions of the packages an episode's
numbers depend on (RESULT_PACKAGES) are refused (VersionMismatch).

Into a run's log: ``evaluate_into(runner, episodes)`` evaluates on workers built like
``runner`` and hands each evaluated episode to ``runner`` as its next episode (its log, its
kept episodes), recording the batch's number in the run and the episode's position in it;
``episodic replay`` re-runs such an episode as the first of a fresh runner, bit-identically.
``read_batch`` reads a BATCH.h5 file of episodes' commands (``episodic evaluate``).
"""
from __future__ import annotations

import json
import math
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, cast

import h5py
import numpy as np

from episodic.interface.commands import Command, Limits
from episodic.interface.robot import Robot, RobotError, load_robot
from episodic.interface.vocabulary import EpisodeResult, Flag, Kind
from episodic.logs.episode import EpisodeBuffer
from episodic.logs.layout import COMMAND_ARRAYS, COMMAND_ATTRS, command_from_record, decode_attr, software_versions
from episodic.runtime.runner import Runner
from episodic.task import Task
from episodic.tasks import TASKS, make_task

BATCH_END_MESSAGE = "the episode's commands ended before its last segment"
BATCH_ABORT_MESSAGE = "a batch arrived before the episode ended"
DEFAULT_CHUNK_SIZE = 8  # episodes per chunk sent to an executor
CACHED_SETUPS = 4       # setups whose idle runners a process keeps (the least recently used go first)
# the packages an episode's numbers depend on: results computed with other versions are refused
RESULT_PACKAGES = ("episodic", "mujoco", "numpy", "scipy")

# a task name, a (name, params) pair, or a callable returning a fresh Task object
TaskSpec = str | tuple | Callable[[], Task]
ProgressCallback = Callable[[int, int], None]  # (episodes done, episodes in all)


class Executor(Protocol):
    """What ``evaluate``'s ``executor`` must offer: ``submit(fn, *args)`` -> a future whose
    ``result()`` returns ``fn(*args)`` (concurrent.futures, Dask's ``Client.get_executor()``)."""

    def submit(self, fn: Callable[..., Any], /, *args: Any) -> Any: ...


class VersionMismatch(RuntimeError):
    """A worker evaluated with other versions of RESULT_PACKAGES than the gathering process."""


class BatchFileError(ValueError):
    """A BATCH.h5 file cannot be read as a batch; the message says what is wrong and where."""


@dataclass(frozen=True)
class Setup:
    """What a worker builds its runners from; what an executor's workers get when ``task`` and
    ``robot`` are names (``by_name``).

    ``task``: a task name of the registry (episodic.tasks.TASKS), a Task subclass, or (in-process
    only) a factory returning a fresh Task; ``params``: the task's parameters as sorted (name,
    value) pairs (for a name or a class); ``robot``: a folder of robots/ by name, or a Robot;
    ``seed``: the run's seed; ``limits``: the runner's size limits."""

    task: str | type[Task] | Callable[[], Task]
    params: tuple[tuple[str, Any], ...]
    robot: str | Robot
    seed: int
    limits: Limits = Limits()

    @property
    def key(self) -> tuple:
        """The setup as a dictionary key (a Robot by its settings)."""
        robot = self.robot if isinstance(self.robot, str) else json.dumps(self.robot.settings_dict(), sort_keys=True)
        return self.task, self.params, robot, self.seed, self.limits

    @property
    def by_name(self) -> bool:
        """Whether the task and the robot are given by name (what other machines can rebuild)."""
        return isinstance(self.task, str) and isinstance(self.robot, str)

    def make_task(self) -> Task:
        """A fresh Task of this setup."""
        if isinstance(self.task, str):
            return make_task(self.task, dict(self.params))
        if isinstance(self.task, type):
            assert issubclass(self.task, Task)  # setup_for keeps only Task subclasses as classes
            return self.task.with_params(dict(self.params))
        return self.task()

    def build(self) -> Runner:
        """A runner of this setup: blocking simulation, no log file, no kept episodes."""
        return Runner(self.make_task(), self.robot, seed=self.seed, limits=self.limits, keep_episodes=False)


def _robot_spec(robot: Robot | str) -> Robot | str:
    """``robot`` by name when it is the robot of that folder of robots/ unchanged (RobotError for
    an unknown name), else the Robot itself."""
    if isinstance(robot, str):
        load_robot(robot)
        return robot
    try:
        unchanged = load_robot(robot.name).settings_dict() == robot.settings_dict()
    except RobotError:
        unchanged = False
    return robot.name if unchanged else robot


def _task_spec(task: Task) -> tuple[str | type[Task], tuple[tuple[str, Any], ...]]:
    """A Task object as (its registry name, or its class when not registered, its parameters)."""
    cls = type(task)
    return (task.name if TASKS.get(task.name) is cls else cls), tuple(sorted(task.params().items()))


def setup_for(task: TaskSpec, robot: Robot | str = "wam", seed: int = 0, limits: Limits = Limits()) -> Setup:
    """The Setup of ``task`` (a name, (name, params), a Task class or a factory returning a fresh
    Task; not a Task object: each thread needs its own) on ``robot``. A name's parameters are
    checked here (TaskError), so a bad one fails before anything is sent to a worker."""
    if isinstance(task, Task):
        raise TypeError("evaluate takes a task name, (name, params) or a factory returning a fresh Task, "
                        "not a Task object: each thread needs its own")
    if isinstance(task, str):
        task = (task, {})
    name: str | type[Task] | Callable[[], Task]
    if isinstance(task, tuple) and len(task) == 2 and isinstance(task[0], str):
        name, spec = _task_spec(make_task(task[0], dict(task[1] or {})))
    elif isinstance(task, type) and issubclass(task, Task):
        name, spec = _task_spec(task())
    elif callable(task):
        name, spec = cast("Callable[[], Task]", task), ()  # a factory returning a fresh Task, as TaskSpec says
    else:
        raise TypeError(f"unknown task {task!r}: use a name, (name, params) or a factory returning a Task")
    return Setup(name, spec, _robot_spec(robot), int(seed), limits)


def runner_setup(runner: Runner) -> Setup:
    """The Setup that builds runners like ``runner``: its task's class and parameters, its robot,
    its seed and limits."""
    name, params = _task_spec(runner.task)
    return Setup(name, params, _robot_spec(runner.robot), runner.seed, runner.limits)


class Runners:
    """The idle runners of this process per setup, kept for the next batch of the same setup (so
    a worker builds its runners once); those of at most CACHED_SETUPS setups, the least recently
    used closed first. Thread-safe; ``len`` counts the idle runners."""

    def __init__(self) -> None:
        self._idle: OrderedDict[tuple, list[Runner]] = OrderedDict()
        self._lock = threading.Lock()

    def borrow(self, setup: Setup) -> Runner:
        """An idle runner of ``setup``, or a new one."""
        with self._lock:
            idle = self._idle.get(setup.key)
            if idle:
                return idle.pop()
        return setup.build()

    def give_back(self, setup: Setup, runner: Runner) -> None:
        """Keep ``runner`` (of ``setup``) for the next batch."""
        with self._lock:
            self._idle.setdefault(setup.key, []).append(runner)
            self._idle.move_to_end(setup.key)
            evicted = [self._idle.popitem(last=False)[1] for _ in range(len(self._idle) - CACHED_SETUPS)]
        for runners in evicted:
            for r in runners:
                r.close()

    def __len__(self) -> int:
        with self._lock:
            return sum(len(r) for r in self._idle.values())


RUNNERS = Runners()


@dataclass(frozen=True)
class Chunk:
    """A slice of a population as sent to a worker: ``episodes`` as (position in the population,
    commands) pairs, evaluated on ``threads`` threads of the worker; ``keep_steps``: return each
    episode's per-step log; ``keep_episodes``: return each episode as the runner logged it (an
    EpisodeBuffer, for writing it to a log)."""

    setup: Setup
    episodes: tuple[tuple[int, tuple[Command, ...]], ...]
    threads: int = 1
    keep_steps: bool = False
    keep_episodes: bool = False


@dataclass(frozen=True)
class ChunkResult:
    """A chunk's results: (position, EpisodeResult, EpisodeBuffer or None) per episode, and the
    worker's ``software_versions()``."""

    results: tuple[tuple[int, EpisodeResult, EpisodeBuffer | None], ...]
    versions: dict[str, str]


def _run_episode(r: Runner, commands: Sequence[Command], keep_steps: bool,
                 keep_episode: bool) -> tuple[EpisodeResult, EpisodeBuffer | None]:
    """One episode as the first of a fresh runner ``r``: its result, and the episode as logged
    when ``keep_episode`` (None when it never started)."""
    r.start_afresh()
    replies = r.send_episode(commands)
    cut = r.machine.episode is not None  # its commands ran out before its last segment
    r.abort(Flag.INTERRUPTED, BATCH_END_MESSAGE)  # only when still running
    ep = r.machine.last_episode
    names = tuple(r.state_names)
    rewards = np.array([x.reward for x in replies], dtype=float)
    states = np.array([x.state for x in replies], dtype=float).reshape(len(replies), len(names))
    if ep is None:  # never started (e.g. no start command, or it was refused)
        first = replies[0] if replies else None
        flag = first.flag if first is not None else Flag.OUT_OF_ORDER
        message = first.message if first is not None else "no commands"
        success, n_steps = False, 0
    else:
        flag, message, success, n_steps = Flag(ep.flag), ep.message, bool(ep.success), ep.n_steps
    result = EpisodeResult(
        # the replies' rewards, and the charge of an episode the batch's end cut short (as the log has it)
        episode_return=float(rewards.sum()) + (ep.early_end if cut and ep is not None else 0.0), rewards=rewards,
        flags=tuple(Flag(x.flag) for x in replies),
        task_states=states, command_steps=np.array([x.n_steps for x in replies], dtype=int), flag=flag,
        message=message, success=success, n_steps=int(n_steps), state_names=names,
        steps=(r.get_episode() if ep is not None else None) if keep_steps else None)
    return result, ep if keep_episode else None


def _shares(items: Sequence, k: int) -> list[list]:
    """``items`` dealt into ``k`` interleaved shares (episodes of similar length spread evenly)."""
    return [list(items[i::k]) for i in range(k)]


def evaluate_chunk(chunk: Chunk, tick: Callable[[], None] | None = None) -> ChunkResult:
    """Evaluate ``chunk`` in this process on ``chunk.threads`` threads, each on a runner of
    ``RUNNERS`` (what an executor's worker runs). ``tick()`` is called after each episode (from
    the thread that evaluated it)."""
    setup, keep = chunk.setup, (chunk.keep_steps, chunk.keep_episodes)

    def share(items: list) -> list:
        runner = RUNNERS.borrow(setup)
        try:
            out = []
            for position, commands in items:
                out.append((position, *_run_episode(runner, commands, *keep)))
                if tick is not None:
                    tick()
            return out
        finally:
            RUNNERS.give_back(setup, runner)

    k = max(1, min(chunk.threads, len(chunk.episodes)))
    if k == 1:
        done = [share(list(chunk.episodes))]
    else:
        with ThreadPoolExecutor(max_workers=k, thread_name_prefix="episodic-batch") as pool:
            done = list(pool.map(share, _shares(chunk.episodes, k)))
    return ChunkResult(tuple(x for part in done for x in part), software_versions())


def check_versions(theirs: dict[str, str], ours: dict[str, str]) -> None:
    """VersionMismatch naming each of RESULT_PACKAGES whose version differs between a worker
    (``theirs``) and this process (``ours``)."""
    differ = [(k, theirs.get(k, "none"), ours.get(k, "none")) for k in RESULT_PACKAGES if theirs.get(k) != ours.get(k)]
    if differ:
        what = ", ".join(f"{k} {there} on the worker, {here} here" for k, there, here in differ)
        raise VersionMismatch(
            f"results from a worker with other software versions are refused ({what}): an episode's numbers "
            f"are bit-identical only on the same versions; install the versions of this process on the "
            f"workers (pip install {' '.join(f'{k}=={here}' for k, _, here in differ)}; mujoco is the "
            f"distribution mujoco-core) and restart them")


def _check_count(name: str, value: int) -> int:
    if isinstance(value, bool) or int(value) != value or value < 1:
        raise ValueError(f"{name} must be a positive integer, got {value!r}")
    return int(value)


def _counted(progress: ProgressCallback, total: int) -> Callable[[], None]:
    """A tick() for each episode done, from any thread: calls progress(done, total), one at a time."""
    lock, done = threading.Lock(), [0]

    def tick() -> None:
        with lock:
            done[0] += 1
            progress(done[0], total)

    return tick


def _evaluate(setup: Setup, episodes: Sequence[Sequence[Command]], threads: int, executor: Executor | None,
              chunk_size: int, keep_steps: bool, keep_episodes: bool,
              progress: ProgressCallback | None) -> list[tuple[EpisodeResult, EpisodeBuffer | None]]:
    """The results (and episodes as logged, when ``keep_episodes``) of ``episodes`` in order."""
    threads, chunk_size = _check_count("threads", threads), _check_count("chunk_size", chunk_size)
    population = [(i, tuple(e)) for i, e in enumerate(episodes)]
    n = len(population)
    if not n:
        return []
    if executor is None:
        tick = None if progress is None else _counted(progress, n)
        results = evaluate_chunk(Chunk(setup, tuple(population), threads, keep_steps, keep_episodes), tick).results
    else:
        if not setup.by_name:
            raise TypeError("with an executor, give the task as a name or (name, params) and the robot as a name "
                            "of robots/ (a task factory or a changed Robot cannot be rebuilt in another process)")
        chunks = [Chunk(setup, tuple(s), threads, keep_steps, keep_episodes)
                  for s in _shares(population, math.ceil(n / chunk_size))]
        futures = [executor.submit(evaluate_chunk, c) for c in chunks]
        ours, gathered = software_versions(), []
        try:
            for future in futures:
                got = future.result()
                check_versions(got.versions, ours)
                gathered += got.results
                if progress is not None:
                    progress(len(gathered), n)
        except BaseException:
            for future in futures:
                future.cancel()
            raise
        results = tuple(gathered)
    ordered: list[tuple[EpisodeResult, EpisodeBuffer | None] | None] = [None] * n
    for position, result, ep in results:
        ordered[position] = (result, ep)
    return ordered  # type: ignore[return-value]


def evaluate(episodes: Sequence[Sequence[Command]], task: TaskSpec, robot: Robot | str = "wam", *,
             threads: int = 1, seed: int = 0, keep_steps: bool = False, executor: Executor | None = None,
             chunk_size: int = DEFAULT_CHUNK_SIZE, limits: Limits = Limits(), log: str | Path | None = None,
             overwrite: bool = False, progress: ProgressCallback | None = None) -> list[EpisodeResult]:
    """Evaluate ``episodes`` (each a list of command objects: a start, then segments and gain
    sets) of ``task`` (a name, (name, params), or a factory returning a fresh Task) on ``robot``;
    one EpisodeResult per episode, in the order given, each bit-identical to running that episode
    alone in a fresh runner (module docstring).

    ``threads``: threads evaluating in this process, or with ``executor`` in each worker per
    chunk; ``executor``: evaluate on its workers instead, in chunks of ``chunk_size`` episodes
    (the task by name and the robot by name only; VersionMismatch for results from other
    versions); ``keep_steps``: also return each episode's per-step log; ``limits``: the runner's
    size limits. ``log``: also write the episodes to this new run log (LogError if it exists,
    unless ``overwrite``) as batch 0 of a runner of this setup (see ``evaluate_into``).
    ``progress(done, total)`` is called as episodes are done (per episode in this process, from
    its threads one at a time; per chunk gathered from an executor)."""
    setup = setup_for(task, robot, seed, limits)
    if log is not None:
        with Runner(setup.make_task(), setup.robot, log=log, seed=setup.seed, limits=limits, keep_episodes=False,
                    overwrite=overwrite) as runner:
            return evaluate_into(runner, episodes, threads=threads, executor=executor, keep_steps=keep_steps,
                                 chunk_size=chunk_size, progress=progress)
    return [r for r, _ in _evaluate(setup, episodes, threads, executor, chunk_size, keep_steps, False, progress)]


def evaluate_into(runner: Runner, episodes: Sequence[Sequence[Command]], *, threads: int = 1,
                  executor: Executor | None = None, keep_steps: bool = False, chunk_size: int = DEFAULT_CHUNK_SIZE,
                  progress: ProgressCallback | None = None) -> list[EpisodeResult]:
    """Evaluate ``episodes`` as ``evaluate`` does, on workers built like ``runner`` (its task's
    class and parameters, its robot, seed and limits; blocking simulation), and hand each
    evaluated episode to ``runner`` in order, in the calling thread, as its next episode: written
    to its log, kept in ``runner.episodes`` when it keeps episodes, passed to whatever else
    watches its finished episodes; numbered as the runner's next episodes, with the batch's
    number in the run (0, 1, ... per runner) and the episode's position in the batch (attributes
    batch and batch_position, columns of ``episodic info``). An episode whose start was refused
    never ran: its refused commands are noted as the runner notes refusals outside an episode
    (the log's /rejected), and its position is left out of the log.

    An episode running on ``runner`` is aborted with Flag.ABORTED_BY_LEARNER (BATCH_ABORT_MESSAGE)
    before the batch's episodes are handed over, as a new start would abort it (it stays running
    when the evaluation fails, e.g. with VersionMismatch). A runner that is not a blocking
    simulation (realtime mode, a driven robot) is refused (ValueError): a batch's episodes run
    as first episodes of fresh simulations, which only a blocking run's log can hold and replay."""
    if runner.mode != "blocking":
        raise ValueError(f"this runner is in {runner.mode} mode, and a batch runs in blocking simulation, each "
                         f"episode as the first of a fresh runner: evaluate batches with a blocking runner "
                         f"(episodic serve --mode blocking)")
    setup = runner_setup(runner)
    episodes = [tuple(e) for e in episodes]
    done = _evaluate(setup, episodes, threads, executor, chunk_size, keep_steps, True, progress)
    runner.abort(Flag.ABORTED_BY_LEARNER, BATCH_ABORT_MESSAGE)  # only when one is running
    batch = runner.begin_batch()
    for position, (commands, (result, ep)) in enumerate(zip(episodes, done)):
        if ep is None:
            for command, flag in zip(commands, result.flags):
                if flag != Flag.OK:  # e.g. a reset outside an episode is answered OK
                    runner.record_refusal(command, flag)
            continue
        runner.append_episode(ep, batch=batch, batch_position=position)
    return [result for result, _ in done]


# -- BATCH.h5 ----------------------------------------------------------------------------------
@dataclass
class BatchFile:
    """A BATCH.h5 file read: ``episodes`` (each a list of commands) in the file's order, the root
    attributes that name the setup (task, task_params, robot, seed: those present) and the
    episodes ``skipped`` (group name -> why: in a log, those not written whole)."""

    episodes: list[list[Command]]
    metadata: dict[str, Any]
    skipped: dict[str, str]


SETUP_ATTRS = ("task", "task_params", "robot", "seed")
KINDS = {k.value: k for k in (Kind.START, Kind.TRAJECTORY, Kind.GAINS, Kind.RESET, Kind.MALFORMED)}


def _by_number(names) -> list[str]:
    """Group names in number order (000010 and 10 alike after 9); other names after, by name."""
    return sorted(names, key=lambda s: (0, int(s), s) if s.isdigit() else (1, 0, s))


def _scalar_field(group: h5py.Group, name: str, where: str):
    """A command's scalar field: an attribute (as a log stores it) or a one-element dataset (as
    Octave's h5create/h5write make one); None when absent."""
    if name in group.attrs:
        value = decode_attr(group.attrs[name])
    elif name in group:
        value = group[name][()]
    else:
        return None
    if isinstance(value, (str, bytes)):
        return value.decode() if isinstance(value, bytes) else value
    value = np.asarray(value)
    if value.size != 1 or value.dtype.kind not in "biuf":
        raise BatchFileError(f"{where}: '{name}' must be one number, got {value.dtype} of shape {value.shape}")
    return value.item()


def _array_field(dataset: h5py.Dataset, name: str, where: str) -> np.ndarray:
    """A command's array (float64); a vector written as a row or a column (1 x n, n x 1) flattened."""
    value = np.asarray(dataset[()])
    if value.dtype.kind not in "biuf":
        raise BatchFileError(f"{where}: '{name}' must be numeric, got {value.dtype}")
    value = value.astype(float)
    if name not in ("q", "qd", "qdd") and value.ndim > 1 and sum(n > 1 for n in value.shape) <= 1:
        value = value.ravel()
    return value


def _read_command(g: h5py.Group, position: int, n_commands: int, episode_id: int, where: str) -> Command:
    """One command group: scalar fields as attributes or datasets; ``kind``, ``index``,
    ``max_commands`` and ``episode_id`` completed when absent (docs/log-format.md: batch files)."""
    attrs = {name: _scalar_field(g, name, where) for name in ("kind", *COMMAND_ATTRS)}
    attrs = {k: v for k, v in attrs.items() if v is not None}
    arrays = {name: _array_field(g[name], name, where) for name in COMMAND_ARRAYS
              if name in g and isinstance(g[name], h5py.Dataset)}
    attrs.setdefault("index", position)
    attrs.setdefault("max_commands", n_commands - 1)
    attrs.setdefault("episode_id", episode_id)
    for name in ("index", "max_commands", "episode_id"):
        if not isinstance(attrs[name], (int, float)) or int(attrs[name]) != attrs[name]:
            raise BatchFileError(f"{where}: '{name}' must be a whole number, got {attrs[name]!r}")
        attrs[name] = int(attrs[name])
    if "kind" not in attrs:
        attrs["kind"] = int(Kind.START if attrs["index"] == 0 else
                            Kind.GAINS if "kp" in arrays or "task_gains" in arrays else Kind.TRAJECTORY)
    if attrs["kind"] not in KINDS:
        raise BatchFileError(f"{where}: unknown kind {attrs['kind']!r}; use 0 start, 1 trajectory, 2 gains, 3 reset")
    if KINDS[attrs["kind"]] == Kind.TRAJECTORY and "q" not in arrays:
        raise BatchFileError(f"{where}: a trajectory command needs the dataset 'q' (n_samples, n_dofs) rad")
    return command_from_record(attrs, arrays)


def read_batch(path: str | Path) -> BatchFile:
    """The episodes of a BATCH.h5 file (docs/log-format.md: batch files; a run log is one), in the order of
    their group names' numbers; BatchFileError saying what is wrong and where."""
    try:
        f = h5py.File(path, "r")
    except FileNotFoundError:
        raise BatchFileError(f"{path}: no such file") from None
    except BlockingIOError:
        raise BatchFileError(f"{path} is open in another process (a runner still writing it?); try again once "
                             f"it is closed") from None
    except OSError as exc:
        raise BatchFileError(f"{path} is not an HDF5 file ({exc}); a batch is an HDF5 file of "
                             f"/episodes/<n>/commands/<k>/ groups (episodic evaluate --help)") from None
    with f:
        if not isinstance(f.get("episodes"), h5py.Group):
            raise BatchFileError(f"{path} has no /episodes group: a batch holds /episodes/<n>/commands/<k>/ "
                                 f"groups, one per episode and command (episodic evaluate --help)")
        metadata = {k: decode_attr(f.attrs[k]) for k in SETUP_ATTRS if k in f.attrs}
        episodes, skipped = [], {}
        for n, name in enumerate(_by_number(f["episodes"])):
            g = f["episodes"][name]
            if not g.attrs.get("complete", True):
                skipped[name] = "it was not written whole"
                continue
            where = f"{path}: /episodes/{name}"
            if not isinstance(g.get("commands"), h5py.Group) or not len(g["commands"]):
                raise BatchFileError(f"{where} has no commands/ group of commands (commands/000/, commands/001/, ...)")
            cmds = _by_number(g["commands"])
            try:
                episodes.append([_read_command(g["commands"][c], k, len(cmds), n + 1, f"{where}/commands/{c}")
                                 for k, c in enumerate(cmds)])
            except (TypeError, ValueError, KeyError) as exc:
                if isinstance(exc, BatchFileError):
                    raise
                raise BatchFileError(f"{where}: cannot read its commands ({exc})") from None
    if not episodes:
        raise BatchFileError(f"{path} holds no episode to evaluate"
                             + (f" (skipped: {', '.join(sorted(skipped))})" if skipped else ""))
    return BatchFile(episodes, metadata, skipped)

