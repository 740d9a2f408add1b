"""episodic: run robot-arm episodes one command at a time for a learner in another process.

The names most learners need, loaded when first used (``import episodic`` alone stays light):
``episodic.Runner`` (episodes in this process), ``episodic.Client`` (a runner's channel in shared
memory), ``episodic.make_task`` and ``episodic.load_robot``."""
from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

_NAMES = {"Runner": "episodic.runtime.runner", "Client": "episodic.bridge.client",
          "make_task": "episodic.tasks", "load_robot": "episodic.interface.robot"}
__all__ = ["Client", "Runner", "__version__", "load_robot", "make_task"]


def __getattr__(name: str) -> Any:
    if name not in _NAMES:
        raise AttributeError(f"module 'episodic' has no attribute {name!r}")
    return getattr(importlib.import_module(_NAMES[name]), name)
