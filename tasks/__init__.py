"""Benchmark tasks and where any task is found.

Each module of this package defines Task subclasses with a ``name``; TASKS maps those names to
the classes (found by importing every module here): the built-in tasks. A task is named, wherever
episodic takes one (``make_task``, ``episodic serve --task``, a batch, a Dask worker, a log being
replayed), in one of three ways, resolved by :func:`task_class` in this order:

1. a built-in name (``reach``);
2. the name of an entry point in the group ``episodic.tasks`` of an installed package (its
   pyproject.toml: ``[project.entry-points."episodic.tasks"]`` ``strike = "episodic_strike:Strike"``);
3. a ``module:Class`` spec of an importable module (``my_tasks:Strike``).

A run log records the task's name, its ``module:Class`` spec and the package that provides it
(``task_source``); :func:`logged_task` rebuilds a log's task from them, or says what to install.
"""
from __future__ import annotations

import importlib
import importlib.metadata
import pkgutil
from collections.abc import Callable, Mapping
from typing import cast

from episodic.interface.robot import Robot
from episodic.task import StepView, Task, TaskError, TaskSource, class_spec
from episodic.task.source import importable_elsewhere

ENTRY_POINT_GROUP = "episodic.tasks"  # the entry-point group of installed task packages

HOW_TO_NAME = (f"a task is named by a built-in name, by the name of an installed package's entry point in the "
               f"group '{ENTRY_POINT_GROUP}' (in its pyproject.toml: [project.entry-points.\"{ENTRY_POINT_GROUP}\"] "
               f"NAME = \"module:Class\"; then pip install it), or by a 'module:Class' spec of an importable module "
               f"(e.g. my_tasks:Strike, the module on PYTHONPATH); docs/adding-a-task.md says how to write one")


def _discover() -> dict[str, type[Task]]:
    found: dict[str, type[Task]] = {}
    for info in pkgutil.iter_modules(__path__):
        module = importlib.import_module(f"{__name__}.{info.name}")
        for obj in vars(module).values():
            if isinstance(obj, type) and issubclass(obj, Task) and obj.name and obj.__module__ == module.__name__:
                found[obj.name] = obj
    return dict(sorted(found.items()))


TASKS: dict[str, type[Task]] = _discover()


def installed_tasks() -> dict[str, importlib.metadata.EntryPoint]:
    """The entry points of the group ``episodic.tasks`` of the installed packages, by name (not
    loaded), a built-in's name left out: a built-in name always means the built-in task."""
    points = importlib.metadata.entry_points(group=ENTRY_POINT_GROUP)
    return {ep.name: ep for ep in sorted(points, key=lambda ep: ep.name) if ep.name not in TASKS}


def _checked_class(obj: object, where: str) -> type[Task]:
    if not (isinstance(obj, type) and issubclass(obj, Task)):
        raise TaskError(f"{where} is {obj!r}, not a subclass of episodic.task.Task")
    if not obj.name:
        raise TaskError(f"{where} has no name: give the class a `name: ClassVar[str] = \"...\"`")
    return obj


def _load_entry_point(ep: importlib.metadata.EntryPoint) -> type[Task]:
    package = f"package '{ep.dist.name}' {ep.dist.version}" if ep.dist is not None else "an installed package"
    where = f"entry point '{ep.name}' = '{ep.value}' of {package}"
    try:
        cls = _checked_class(ep.load(), where)
    except (ImportError, AttributeError) as exc:
        raise TaskError(f"{where} cannot be loaded ({exc}); reinstall that package") from None
    if cls.name != ep.name:
        raise TaskError(f"{where} loads task '{cls.name}': the entry point must carry the task's name")
    return cls


def _import_spec(spec: str, hint: str = "install the package that provides it, or put it on PYTHONPATH") -> type[Task]:
    """The class of a 'module:Class' spec; TaskError ending with ``hint`` when the module is missing."""
    module_name, _, qualname = spec.partition(":")
    if not module_name or not qualname:
        raise TaskError(f"task spec '{spec}' is not 'module:Class'")
    try:
        obj: object = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        missing = exc.name or module_name
        which = "" if module_name == missing or module_name.startswith(f"{missing}.") else \
            f" (it imports '{missing}', which is missing)"
        raise TaskError(f"cannot import module '{module_name}' of task spec '{spec}'{which}: {hint}") from None
    for part in qualname.split("."):
        if not hasattr(obj, part):
            raise TaskError(f"module '{module_name}' has no '{qualname}' (task spec '{spec}')")
        obj = getattr(obj, part)
    return _checked_class(obj, f"'{spec}'")


def task_class(spec: str) -> type[Task]:
    """The Task subclass ``spec`` names: a built-in name, an installed entry point's name or a
    ``module:Class`` spec (the module docstring); TaskError saying how to make a task known and
    listing the known ones otherwise."""
    if spec in TASKS:
        return TASKS[spec]
    if ":" in spec:
        return _import_spec(spec)
    installed = installed_tasks()
    if spec in installed:
        return _load_entry_point(installed[spec])
    raise TaskError(f"unknown task '{spec}'; known: {', '.join([*TASKS, *installed])}. {HOW_TO_NAME[0].upper()}"
                    f"{HOW_TO_NAME[1:]}")


def make_task(name: str, params: Mapping[str, str | float] | None = None) -> Task:
    """Task ``name`` (a built-in name, an installed entry point's name or a ``module:Class``
    spec: :func:`task_class`) with difficulty parameters ``params`` (name -> value)."""
    return task_class(name).with_params(params or {})


def registry() -> dict[str, type[Task]]:
    """Every task known by name: the built-in ones, then those of the installed packages' entry
    points (loaded; TaskError for one that cannot be). What `episodic tasks` lists and the generic
    test suites run."""
    return {**TASKS, **{name: _load_entry_point(ep) for name, ep in installed_tasks().items()}}


def reference_commands(cls: type[Task]) -> Callable[[Robot, int], list]:
    """The function ``(robot, episode_id) -> commands`` of the scripted reference ``cls`` declares
    (``Task.reference``); TaskError saying why when it has none or it cannot be imported (a
    built-in task's references are the repository's examples/, importable from its root)."""
    if cls.reference is None:
        raise TaskError(f"task '{cls.name}' declares no scripted reference (Task.reference)")
    module_name, _, attr = cls.reference.commands.partition(":")
    try:
        function = getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError) as exc:
        raise TaskError(f"the reference of task '{cls.name}', {cls.reference.commands}, cannot be loaded ({exc}); "
                        f"examples.* modules are the repository's, importable from its root") from None
    return cast("Callable[[Robot, int], list]", function)


def portable_spec(cls: type[Task]) -> str | None:
    """A string another process resolves (:func:`task_class`) to ``cls``: its name when the name
    means this class (a built-in or an installed entry point), else its ``module:Class`` spec;
    None for a class no other process can import (defined in the main script or in a function)."""
    try:
        if task_class(cls.name) is cls:
            return cls.name
    except TaskError:
        pass
    return class_spec(cls) if importable_elsewhere(cls) else None


def logged_task(meta: Mapping) -> type[Task]:
    """The task class of a run log whose root attributes are ``meta``: the class its name means
    (:func:`task_class`) when that class has the recorded ``module:Class`` spec (``task_source``),
    else the class the spec imports; by name alone for a log recorded without a spec. TaskError
    naming the package and version to install when the spec cannot be imported."""
    source = meta.get("task_source")
    if not isinstance(source, Mapping) or not source.get("spec"):
        return task_class(str(meta.get("task")))
    recorded = TaskSource(str(source["spec"]), str(source.get("package", "")), str(source.get("version", "")))
    try:  # the class its name means here, when that is the class recorded (also one registered by hand)
        named = task_class(str(meta.get("task")))
        if class_spec(named) == recorded.spec:
            return named
    except TaskError:
        pass
    try:
        return _import_spec(recorded.spec, recorded.install_hint())
    except TaskError as exc:
        raise TaskError(f"the log's task '{meta.get('task')}': {exc}") from None


__all__ = ["ENTRY_POINT_GROUP", "TASKS", "StepView", "Task", "TaskError", "installed_tasks", "logged_task",
           "make_task", "portable_spec", "reference_commands", "registry", "task_class"]
