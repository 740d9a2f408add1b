"""Batch evaluation in-process: a population of episodes evaluated on k threads.

    from episodic.batch import evaluate
    results = evaluate([swing_commands(robot, s) for s in swings], "ball_in_cup", threads=2)
    returns = [r.episode_return for r in results]

Each episode is a list of command objects (episodic.commands) as a learner would send them: a
start command, then its segments and gain sets. Each thread builds one Runner (no log file) once
and evaluates its share of the episodes on it; MuJoCo models and data are never shared between
threads, and MuJoCo releases the GIL while it steps.

Every episode is evaluated as the first episode of a fresh Runner (blocking simulation): before
it, the thread's runner starts afresh (``Runner.start_afresh``: a new episode machine, the
simulation as it was built), so an episode's result depends only on its own commands, the task, the robot
and the seed: bit-identical to running it alone in a fresh ``Runner(task, robot, seed=seed)``,
whatever the order of the batch, the number of threads and the episode ids in the commands (the
episode's random generator is seeded with (seed, 0), as in a fresh runner).

The commands of an episode are sent in order until one of them ends the episode (its reply's
``episode_done``: the last segment, or a refusal that aborts it); the rest are not sent. An
episode still running after its last command is ended with Flag.INTERRUPTED (BATCH_END_MESSAGE).
"""
from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Callable, Sequence, Union

import numpy as np

from episodic.commands import Command
from episodic.protocol import Flag, Reply
from episodic.robot import Robot
from episodic.runner import Runner
from episodic.task import Task
from episodic.tasks import make_task

BATCH_END_MESSAGE = "the episode's commands ended before its last segment"

# a task name, a (name, params) pair, or a callable returning a fresh Task object
TaskSpec = Union[str, tuple, Callable[[], Task]]


@dataclass(frozen=True)
class EpisodeResult:
    """The outcome of one episode of a batch.

    ``rewards``, ``flags``, ``task_states`` (n_replies, n_state) in the task's column order and
    ``command_steps``: one entry per command sent (the start included; commands after the one
    that ended the episode are not sent). ``episode_return`` the sum of ``rewards``; ``flag``
    the episode's end flag (Flag.OK when it ran to its last segment), ``message`` why not;
    ``success`` the task's verdict; ``n_steps`` every control step of the episode, the move to
    the start included; ``steps`` the per-step log (column -> array, as ``Runner.get_episode``)
    when asked for with ``keep_steps``, else None."""

    episode_return: float
    rewards: np.ndarray
    flags: tuple[Flag, ...]
    task_states: np.ndarray
    command_steps: np.ndarray
    flag: Flag
    message: str
    success: bool
    n_steps: int
    state_names: tuple[str, ...]
    steps: dict[str, np.ndarray] | None = None

    @property
    def task_state(self) -> np.ndarray:
        """The task state after the last command sent (n_state,)."""
        return self.task_states[-1]


def task_factory(task: TaskSpec) -> Callable[[], Task]:
    """A callable returning a fresh Task for ``task``: a name, a (name, params) pair or such a
    callable (a Task object itself is refused: each thread needs its own)."""
    if isinstance(task, Task):
        raise TypeError("evaluate takes a task name, (name, params) or a factory returning a fresh Task, "
                        "not a Task object: each thread needs its own")
    if isinstance(task, str):
        return lambda: make_task(task, {})
    if isinstance(task, tuple) and len(task) == 2 and isinstance(task[0], str):
        name, params = task[0], dict(task[1] or {})
        return lambda: make_task(name, params)
    if callable(task):
        return task
    raise TypeError(f"unknown task {task!r}: use a name, (name, params) or a factory returning a Task")


class _Evaluator:
    """One thread's runner, reused for its share of the episodes."""

    def __init__(self, factory: Callable[[], Task], robot: Robot | str, seed: int):
        self.runner = Runner(factory(), robot, log=None, seed=seed, keep_episodes=False)

    def evaluate(self, commands: Sequence[Command], keep_steps: bool) -> EpisodeResult:
        r = self.runner
        r.start_afresh()
        replies: list[Reply] = []
        for command in commands:
            replies.append(r.send(command))
            if replies[-1].episode_done:
                break
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
        return EpisodeResult(
            episode_return=float(rewards.sum()), rewards=rewards, flags=tuple(Flag(x.flag) for x in replies),
            task_states=states, command_steps=np.array([x.n_steps for x in replies], dtype=int), flag=flag,
            message=message, success=success, n_steps=int(n_steps), state_names=names,
            steps=(r.get_episode() if ep is not None else None) if keep_steps else None)

    def close(self) -> None:
        self.runner.close()


def _evaluate_share(factory, robot, seed, keep_steps, share):
    evaluator = _Evaluator(factory, robot, seed)
    try:
        return [(i, evaluator.evaluate(commands, keep_steps)) for i, commands in share]
    finally:
        evaluator.close()


def evaluate(episodes: Sequence[Sequence[Command]], task: TaskSpec, robot: Robot | str = "wam", *,
             threads: int = 1, seed: int = 0, keep_steps: bool = False) -> list[EpisodeResult]:
    """Evaluate ``episodes`` (each a list of command objects: a start, then segments and gain
    sets) of ``task`` (a name, (name, params), or a factory returning a fresh Task) on ``robot``
    with ``threads`` threads, each with its own Runner; one EpisodeResult per episode, in the
    order given, each bit-identical to running that episode alone in a fresh runner (module
    docstring). ``keep_steps``: also return each episode's per-step log."""
    if int(threads) != threads or threads < 1:
        raise ValueError(f"threads must be a positive integer, got {threads!r}")
    factory = task_factory(task)
    episodes = [list(e) for e in episodes]
    if not episodes:
        return []
    k = min(int(threads), len(episodes))
    # interleaved shares, so that episodes of similar length spread evenly over the threads
    shares = [[(i, episodes[i]) for i in range(t, len(episodes), k)] for t in range(k)]
    results: list[EpisodeResult | None] = [None] * len(episodes)
    if k == 1:
        done = [_evaluate_share(factory, robot, seed, keep_steps, shares[0])]
    else:
        with ThreadPoolExecutor(max_workers=k, thread_name_prefix="episodic-batch") as pool:
            futures = [pool.submit(_evaluate_share, factory, robot, seed, keep_steps, s) for s in shares]
            done = [f.result() for f in futures]
    for share in done:
        for i, result in share:
            results[i] = result
    return results  # type: ignore[return-value]
