"""Shared fixtures (helpers shared by several modules are in tests/helpers.py), and the fast loop's
rule: a test not marked ``slow`` starts no process (subprocess, ``episodic serve``, fork)."""
from __future__ import annotations

import sys

import pytest

from episodic.runtime.runner import Runner
from episodic.tasks import make_task

# audit events (sys.addaudithook) raised when this process starts another one (multiprocessing's
# spawn and forkserver start methods raise none: a test using them is marked slow by hand)
PROCESS_EVENTS = frozenset({"subprocess.Popen", "os.fork", "os.forkpty", "os.posix_spawn", "os.spawn", "os.exec"})
_running: list[str] = []  # the node id of the test running now, if any
_started: dict[str, str] = {}  # node id -> the first process-starting event seen while it ran


def _note_process(event: str, args: tuple) -> None:
    if _running and event in PROCESS_EVENTS and _running[0] not in _started:
        _started[_running[0]] = f"{event} {str(args[:2])[:160]}"


sys.addaudithook(_note_process)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item):
    """Note whether a test not marked slow starts a process (in its fixtures or its body)."""
    if item.get_closest_marker("slow") is not None:
        yield
        return
    _running.append(item.nodeid)
    try:
        yield
    finally:
        _running.clear()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item):
    """Fail a test not marked slow that started a process while being set up or run."""
    result = yield
    if item.nodeid in _started:
        pytest.fail(f"this test is not marked slow but started a process ({_started[item.nodeid]}); mark it "
                    f"@pytest.mark.slow, or start no process: the fast loop (-m 'not slow') starts none", pytrace=False)
    return result


@pytest.fixture
def runner():
    with Runner(make_task("reach")) as r:
        yield r
