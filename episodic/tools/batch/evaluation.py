"""Evaluating a population: on threads of this process, in chunks on an executor's workers, and
into a run (``evaluate_into``); the package's text (episodic.tools.batch) says how."""
from __future__ import annotations

import math
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from episodic.interface.commands import BatchTooLarge, Command, Limits, most_steps
from episodic.interface.robot import Robot, load_robot
from episodic.interface.vocabulary import EpisodeResult, Flag
from episodic.logs.episode import EpisodeBuffer
from episodic.logs.layout import software_versions
from episodic.runtime.runner import Runner
from episodic.tools.batch.setups import RUNNERS, Setup, TaskSpec, runner_setup, setup_for

BATCH_END_MESSAGE = "the episode's commands ended before its last segment"
BATCH_ABORT_MESSAGE = "a batch arrived before the episode ended"
DEFAULT_CHUNK_SIZE = 8  # episodes per chunk sent to an executor


# the packages an episode's numbers depend on: results computed with other versions are refused
RESULT_PACKAGES = ("episodic", "mujoco", "numpy", "scipy")
ProgressCallback = Callable[[int, int], None]  # (episodes done, episodes in all)


class Executor(Protocol):
    """What ``evaluate``'s ``executor`` must offer: ``submit(fn, *args)`` -> a future whose
    ``result()`` returns ``fn(*args)`` (concurrent.futures, Dask's ``Client.get_executor()``)."""

    def submit(self, fn: Callable[..., Any], /, *args: Any) -> Any: ...


class VersionMismatch(RuntimeError):
    """A worker evaluated with other versions of RESULT_PACKAGES than the gathering process."""


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


def _check_size(setup: Setup, episodes: Sequence[Sequence[Command]]) -> None:
    """BatchTooLarge unless ``episodes`` together run at most ``setup.limits.max_batch_steps``
    control steps (a batch's episodes are held until it ends: this bounds a runner's memory)."""
    robot = setup.robot if isinstance(setup.robot, Robot) else load_robot(setup.robot)
    limit = setup.limits.max_batch_steps
    steps = sum(most_steps(commands, robot.control_rate, setup.limits) for commands in episodes)
    if steps > limit:
        raise BatchTooLarge(f"the batch's {len(episodes)} episodes could run {steps} control steps together "
                            f"({steps / robot.control_rate:.0f} s at {robot.control_rate:g} Hz), over the limit of "
                            f"{limit} a batch's episodes may run (they are held until the batch ends); send them "
                            f"in smaller batches, or alone (a single episode's steps go to the log as it runs)")


def _evaluate(setup: Setup, episodes: Sequence[Sequence[Command]], threads: int, executor: Executor | None,
              chunk_size: int, keep_steps: bool, keep_episodes: bool,
              progress: ProgressCallback | None) -> list[tuple[EpisodeResult, EpisodeBuffer | None]]:
    """The results (and episodes as logged, when ``keep_episodes``) of ``episodes`` in order."""
    threads, chunk_size = _check_count("threads", threads), _check_count("chunk_size", chunk_size)
    population = [(i, tuple(e)) for i, e in enumerate(episodes)]
    n = len(population)
    if not n:
        return []
    _check_size(setup, [commands for _, commands in population])
    if executor is None:
        tick = None if progress is None else _counted(progress, n)
        results = evaluate_chunk(Chunk(setup, tuple(population), threads, keep_steps, keep_episodes), tick).results
    else:
        if not setup.by_name:
            raise TypeError("with an executor, give the task as a name, a 'module:Class' spec, (name or spec, params) "
                            "or a Task class of an importable module, and the robot as a name of robots/ (a task "
                            "factory, a class of the main script or of a function, or a changed Robot cannot be "
                            "rebuilt in another process)")
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
    sets) of ``task`` (a name or "module:Class" spec, (name or spec, params), a Task class, or a
    factory returning a fresh Task: setup_for) on ``robot``; one EpisodeResult per episode, in the
    order given, each bit-identical to running that episode alone in a fresh runner (module
    docstring).

    ``threads``: threads evaluating in this process, or with ``executor`` in each worker per
    chunk; ``executor``: evaluate on its workers instead, in chunks of ``chunk_size`` episodes
    (the task by name, spec or importable class, the robot by name only; VersionMismatch for results from other
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

