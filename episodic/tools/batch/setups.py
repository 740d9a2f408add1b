"""What a batch runs on: a setup (task, robot, seed, limits) that a worker process can rebuild, and
the idle runners a process keeps per setup for the next batch (``RUNNERS``)."""
from __future__ import annotations

import json
import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, cast

from episodic.interface.commands import Limits
from episodic.interface.robot import Robot, RobotError, load_robot
from episodic.runtime.runner import Runner
from episodic.task import Task
from episodic.tasks import make_task, portable_spec

CACHED_SETUPS = 4  # setups whose idle runners a process keeps (the least recently used go first)
# a task name or "module:Class" spec (episodic.tasks.task_class), a (name, params) pair, a Task class, or a
# callable returning a fresh Task object
TaskSpec = str | tuple | Callable[[], Task]


@dataclass(frozen=True)
class Setup:
    """What a worker builds its runners from; what an executor's workers get when ``task`` and
    ``robot`` are names (``by_name``).

    ``task``: a string another process resolves to the task's class (a built-in name, an installed
    entry point's name or a "module:Class" spec: episodic.tasks.task_class), a Task subclass no
    other process can import, or (in-process only) a factory returning a fresh Task; ``params``:
    the task's parameters as sorted (name, value) pairs (for a name or a class); ``robot``: a
    folder of robots/ by name, or a Robot; ``seed``: the run's seed; ``limits``: the runner's size
    limits."""

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
        """Whether the task and the robot are given by name or spec (what other machines can rebuild)."""
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
    """A Task object as (the string another process resolves to its class, or the class when none
    can import it: episodic.tasks.portable_spec, its parameters)."""
    cls = type(task)
    return portable_spec(cls) or cls, tuple(sorted(task.params().items()))


def setup_for(task: TaskSpec, robot: Robot | str = "wam", seed: int = 0, limits: Limits = Limits()) -> Setup:
    """The Setup of ``task`` (a name or "module:Class" spec, (name or spec, params), a Task class or
    a factory returning a fresh Task; not a Task object: each thread needs its own) on ``robot``.
    A name's parameters are checked here (TaskError), so a bad one fails before anything is sent
    to a worker."""
    if isinstance(task, Task):
        raise TypeError("evaluate takes a task name or spec, (name, params), a Task class or a factory returning "
                        "a fresh Task, "
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
        raise TypeError(f"unknown task {task!r}: use a name or 'module:Class' spec, (name, params), a Task class "
                        f"or a factory returning a Task")
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

