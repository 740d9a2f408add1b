"""Benchmark tasks: each module defines a Task subclass; TASKS maps names to them."""
from __future__ import annotations

from tasks.base import StepView, Task, TaskError
from tasks.reach import Reach

TASKS: dict[str, type[Task]] = {cls.name: cls for cls in (Reach,)}


def make_task(name: str, params: dict[str, str | float] | None = None) -> Task:
    """Task ``name`` with difficulty parameters ``params`` (name -> value)."""
    if name not in TASKS:
        raise TaskError(f"unknown task '{name}'; available: {', '.join(sorted(TASKS))}")
    return TASKS[name].with_params(params or {})


__all__ = ["TASKS", "StepView", "Task", "TaskError", "make_task"]
