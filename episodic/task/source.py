"""Where a task class comes from: its ``module:Class`` spec and the installed distribution (pip
package) that provides its module, as a run log records them so that a log of a task from
another package says what to install to replay it (episodic.tasks resolves the spec)."""
from __future__ import annotations

import functools
import importlib.metadata
from dataclasses import dataclass

from episodic.task.contract import Task


@dataclass(frozen=True)
class TaskSource:
    """``spec``: "module:Class" (importable: the task's module and the class's qualified name);
    ``package`` and ``version``: the distribution that installed the module ("" for a module
    that no installed distribution provides, e.g. one on PYTHONPATH)."""

    spec: str
    package: str = ""
    version: str = ""

    def as_dict(self) -> dict[str, str]:
        return {"spec": self.spec, "package": self.package, "version": self.version}

    def install_hint(self) -> str:
        """What makes the task importable, as a sentence."""
        if self.package:
            return f"install the package that provides it: pip install '{self.package}=={self.version}'"
        module = self.spec.partition(":")[0]
        return f"put module '{module}' on the Python path (PYTHONPATH), or install the package that provides it"


def class_spec(cls: type[Task]) -> str:
    """The "module:Class" spec of ``cls``."""
    return f"{cls.__module__}:{cls.__qualname__}"


def importable_elsewhere(cls: type[Task]) -> bool:
    """Whether another process can import ``cls`` by its spec: not a class of the main script
    (``__main__`` differs in every process) or defined inside a function."""
    return cls.__module__ != "__main__" and "<locals>" not in cls.__qualname__


def _provides(dist: importlib.metadata.Distribution, top_module: str) -> bool:
    """Whether ``dist`` installed the top-level module ``top_module``: its top_level.txt names
    it, or (without one) its file list holds the package or module file."""
    top_level = dist.read_text("top_level.txt")
    if top_level is not None:
        return top_module in top_level.split()
    return any(f.parts[0] == top_module or f.name == f"{top_module}.py" for f in dist.files or ())


@functools.cache
def _distribution(top_module: str) -> tuple[str, str]:
    """(name, version) of the distribution that installed the top-level module ``top_module``,
    ("", "") for none. The distribution named like the module is asked first; only when it
    does not provide the module are all installed distributions' file lists read (about 0.3 s,
    once per top-level name a process asks about)."""
    try:
        same_name = importlib.metadata.distribution(top_module)
    except importlib.metadata.PackageNotFoundError:
        same_name = None
    if same_name is not None and _provides(same_name, top_module):
        return same_name.metadata["Name"], same_name.version
    names = importlib.metadata.packages_distributions().get(top_module, [])
    if not names:
        return "", ""
    name = names[0]
    return name, importlib.metadata.version(name)


def task_source(cls: type[Task]) -> TaskSource:
    """The spec of ``cls`` and the distribution providing its module."""
    package, version = _distribution(cls.__module__.partition(".")[0])
    return TaskSource(class_spec(cls), package, version)
