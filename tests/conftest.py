"""Shared fixtures (helpers shared by several modules are in tests/helpers.py), the fast loop's
rule: a test not marked ``slow`` starts no process (subprocess, ``episodic serve``, fork), and the
rules for several workers (pytest-xdist, ``-n``): a test marked ``serial`` runs alone, and the
modules go to the workers costliest first (tests/module_costs.json), so that no long module
starts while the other worker runs out of work."""
from __future__ import annotations

import fcntl
import json
import os
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

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


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item):
    """Fail a test not marked slow that started a process while being set up or run."""
    result = yield
    if item.nodeid in _started:
        pytest.fail(f"this test is not marked slow but started a process ({_started[item.nodeid]}); mark it "
                    f"@pytest.mark.slow, or start no process: the fast loop (-m 'not slow') starts none", pytrace=False)
    return result


class _Alone:
    """A readers-writer lock across the workers of one pytest-xdist run, on two lock files: every
    test holds the shared side while it is set up, run and torn down, a test marked ``serial`` the
    exclusive side, so it runs with no other test beside it (its wall-clock bounds and real-time
    pacing then measure the code, not the other worker). The turnstile, taken briefly by every
    test and held by a serial test while it waits, keeps the workers from starving it. A serial
    test followed by another on this worker (e.g. the next of its module) keeps the exclusive side
    for it, so the other workers wait once for such a run of serial tests."""

    def __init__(self, run_id: str) -> None:
        base = Path(tempfile.gettempdir()) / f"episodic-tests-{run_id}"
        self.paths = (Path(f"{base}.turnstile"), Path(f"{base}.lock"))
        self._turnstile, self._shared = (path.open("a") for path in self.paths)  # held for the worker's life
        self._kept = False  # the exclusive side is still held from the serial test before

    @contextmanager
    def hold(self, alone: bool, keep: bool) -> Iterator[None]:
        """Hold the lock around one test: ``alone`` for a serial test, ``keep`` to go on holding
        the exclusive side for the next test (a serial one too)."""
        if not (alone and self._kept):
            self._acquire(alone)
        try:
            yield
        finally:
            self._kept = alone and keep
            if not self._kept:
                self._release(alone)

    def _acquire(self, alone: bool) -> None:
        fcntl.flock(self._turnstile, fcntl.LOCK_EX)
        try:
            fcntl.flock(self._shared, fcntl.LOCK_EX if alone else fcntl.LOCK_SH)
        finally:
            if not alone:
                fcntl.flock(self._turnstile, fcntl.LOCK_UN)

    def _release(self, alone: bool) -> None:
        fcntl.flock(self._shared, fcntl.LOCK_UN)
        if alone:
            fcntl.flock(self._turnstile, fcntl.LOCK_UN)


_alone: list[_Alone] = []  # this worker's lock, when the run has several workers
COSTS = Path(__file__).with_name("module_costs.json")  # s per module, as recorded below
RECORD_COSTS = "EPISODIC_TEST_COSTS"  # a file to record this run's seconds per module in
_costs: dict[str, float] = {}  # this run's seconds per module (setup + call + teardown)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The modules costliest first (a module's tests stay together and in order; modules not in
    tests/module_costs.json last, by name): pytest-xdist's loadscope hands out the modules in this
    order (pyproject.toml turns its own reordering, by number of tests, off)."""
    costs = json.loads(COSTS.read_text()) if COSTS.exists() else {}
    rank = {}
    for item in items:
        module = item.nodeid.partition("::")[0]
        rank.setdefault(module, (-costs.get(Path(module).name, 0.0), len(rank)))
    items.sort(key=lambda item: rank[item.nodeid.partition("::")[0]])


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """With EPISODIC_TEST_COSTS set, sum each module's seconds (also the workers' reports, in the
    controller): written at the end of the run, to refresh tests/module_costs.json from a run as CI
    does it (``EPISODIC_TEST_COSTS=tests/module_costs.json python -m pytest``)."""
    if os.environ.get(RECORD_COSTS):
        module = Path(report.nodeid.partition("::")[0]).name
        _costs[module] = _costs.get(module, 0.0) + report.duration


def pytest_sessionfinish(session: pytest.Session) -> None:
    path = os.environ.get(RECORD_COSTS)
    if path and _costs and getattr(session.config, "workerinput", None) is None:  # the controller
        ranked = dict(sorted(((m, round(s, 1)) for m, s in _costs.items()), key=lambda kv: -kv[1]))
        Path(path).write_text(json.dumps(ranked, indent=1) + "\n")


def pytest_configure(config: pytest.Config) -> None:
    worker = getattr(config, "workerinput", None)  # set by pytest-xdist in a worker process
    if worker is not None:
        _alone.append(_Alone(worker["testrunuid"]))


def pytest_unconfigure(config: pytest.Config) -> None:
    for alone in _alone:  # a worker still running keeps its open files: its locks stay in force
        for path in alone.paths:
            path.unlink(missing_ok=True)


@contextmanager
def _watching_processes(item: pytest.Item) -> Iterator[None]:
    """Note whether a test not marked slow starts a process (in its fixtures or its body)."""
    if item.get_closest_marker("slow") is not None:
        yield
        return
    _running.append(item.nodeid)
    try:
        yield
    finally:
        _running.clear()


def _serial(item: pytest.Item) -> bool:
    return item.get_closest_marker("serial") is not None


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None):
    """Watch a fast test for processes; with several workers, run a ``serial`` test alone."""
    with _watching_processes(item):
        if not _alone:
            yield
            return
        with _alone[0].hold(_serial(item), nextitem is not None and _serial(nextitem)):
            yield


@pytest.fixture
def runner():
    with Runner(make_task("reach")) as r:
        yield r
