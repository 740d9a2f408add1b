"""Benchmark tasks: each module of this package defines Task subclasses with a ``name``;
TASKS maps those names to the classes (found by importing every module here)."""
from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Mapping

from episodic.task import StepView, Task, TaskError


def _discover() -> dict[str, type[Task]]:
    found: dict[str, type[Task]] = {}
    for info in pkgutil.iter_modules(__path__):
        module = importlib.import_module(f"{__name__}.{info.name}")
        for obj in vars(module).values():
            if isinstance(obj, type) and issubclass(obj, Task) and obj.name and obj.__module__ == module.__name__:
                found[obj.name] = obj
    return dict(sorted(found.items()))


TASKS: dict[str, type[Task]] = _discover()


def make_task(name: str, params: Mapping[str, str | float] | None = None) -> Task:
    """Task ``name`` with difficulty parameters ``params`` (name -> value)."""
    if name not in TASKS:
        raise TaskError(f"unknown task '{name}'; available: {', '.join(TASKS)}")
    return TASKS[name].with_params(params or {})


__all__ = ["TASKS", "StepView", "Task", "TaskError", "make_task"]
