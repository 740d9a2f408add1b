"""Shared fixtures (helpers shared by several modules are in tests/helpers.py)."""
from __future__ import annotations

import pytest

from episodic.runtime.runner import Runner
from episodic.tasks import make_task


@pytest.fixture
def runner():
    with Runner(make_task("reach")) as r:
        yield r
