"""Shared fixtures: a reach runner and a smooth segment generator."""
from __future__ import annotations

import numpy as np
import pytest

from episodic.runner import Runner
from episodic.tasks import make_task


def wave(home: np.ndarray, n: int = 500, amplitude: float = 0.2, phase: float = 0.0) -> np.ndarray:
    """A smooth (n, 7) rad segment around ``home``; starts at home when phase is 0."""
    t = np.arange(1, n + 1) / n
    shape = np.sin(np.pi * t + phase) - np.sin(phase)
    return home + amplitude * shape[:, None] * np.linspace(1.0, 0.3, home.size)


@pytest.fixture
def runner():
    with Runner(make_task("reach")) as r:
        yield r
