"""Every terminating signal stops `episodic serve` cleanly, with real processes: SIGINT, SIGTERM,
SIGHUP and SIGQUIT, in blocking and in realtime mode, during an episode (realtime: during a long
paced segment, which stops at the next tick) and right after start-up. The runner exits within
EXIT_BOUND s, leaves no shared-memory object behind and logs the unfinished episode with
Flag.INTERRUPTED."""
from __future__ import annotations

import itertools
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from episodic.bridge import Client, RunnerGone
from episodic.bridge.channel import object_paths
from episodic.interface.commands import StartCommand, TrajectoryCommand
from episodic.interface.vocabulary import Flag
from episodic.logs import read_episodes
from episodic.tools.served import ServedRunner
from tests.helpers import channel_name, shm_leftovers, wave

pytestmark = pytest.mark.slow  # runner processes

HOME = np.array([0, 0.5876, 0, 1.36, 0, -0.321, -1.57])
DT = 0.002  # s, the WAM's control period
SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT)
# s from the signal to the runner's exit: the runner stops within 0.2 s, then the interpreter
# (MuJoCo, h5py) tears down
EXIT_BOUND = 1.0
LONG_SEGMENT = 20.0  # s of a realtime segment the signal interrupts
IN_SEGMENT = 0.5     # s the segment runs before the signal


@pytest.fixture(autouse=True)
def no_leftovers():
    before = shm_leftovers()
    yield
    assert set(shm_leftovers()) <= set(before)  # a test may end a spare runner (below), never leave one of its own


class Spares:
    """Blocking runners, each logging to its own file, for the tests below that signal one: they
    start side by side ahead of those tests (their start-up is not what those tests time, and it
    would be spent alone on the machine). ``take()`` gives one ready, or starts one when none is
    left (a test run on its own)."""

    def __init__(self, folder: Path, n: int):
        self.folder, self._numbers = folder, itertools.count()
        self.waiting = [self._start() for _ in range(n)]
        for runner, _ in self.waiting:
            runner.wait_ready()

    def _start(self) -> tuple[ServedRunner, Path]:
        log = self.folder / f"{next(self._numbers)}.h5"
        return ServedRunner(channel_name(), task="reach", log=log, mode="blocking"), log

    def take(self) -> tuple[ServedRunner, Path]:
        """A served blocking runner no test has used, and its log."""
        return self.waiting.pop(0) if self.waiting else self._start()


@pytest.fixture(scope="module")
def spares(tmp_path_factory) -> Iterator[Spares]:
    before = shm_leftovers()
    out = Spares(tmp_path_factory.mktemp("spares"), len(SIGNALS) + 2)  # the blocking cases of the two tests
    yield out
    for runner, _ in out.waiting:
        runner.close()
    assert shm_leftovers() == before


def test_spare_runners_start_side_by_side_and_serve(spares):
    """Run first, beside other tests: the runners the serial tests below signal are started."""
    channels = {runner.channel for runner, _ in spares.waiting}
    assert len(channels) == len(spares.waiting) and all(runner.ready for runner, _ in spares.waiting)


@pytest.mark.parametrize("mode", ["blocking", "realtime"])
def test_a_signal_at_start_up_leaves_no_objects(tmp_path, mode):
    """Signals sent from just before to just after the channel is created (timed from one
    start-up just before; a busier machine moves the moments, not what must hold) leave nothing."""
    before = shm_leftovers()
    first = ServedRunner(channel_name(), task="reach", mode=mode)
    start = time.perf_counter()
    first.wait_ready()
    start_up = time.perf_counter() - start  # s until the channel exists and the banner is out
    first.close()
    for i, sig in enumerate(SIGNALS):  # around the moment the channel is created
        runner = ServedRunner(channel_name(), task="reach", mode=mode, log=tmp_path / f"{i}.h5")
        time.sleep(start_up * (0.88 + 0.08 * i))
        runner.proc.send_signal(sig)
        runner.proc.wait(timeout=30)
        assert shm_leftovers() == before, (signal.Signals(sig).name, runner.stderr_text())
        runner.close()


def own_objects(channel: str) -> set[str]:
    """The shared-memory objects and semaphores (as shm_leftovers names them) named after ``channel``."""
    base = Path(object_paths(channel)["shm"]).name
    return {n for n in shm_leftovers() if (name := n.removeprefix("sem.")) == base or name.startswith(base + ".")}


def signal_and_time(runner: ServedRunner, sig: int) -> float:
    """Send ``sig`` to the runner and wait for its exit; the s that took."""
    start = time.perf_counter()
    runner.proc.send_signal(sig)
    runner.proc.wait(timeout=30)
    return time.perf_counter() - start


@pytest.mark.serial  # wall-clock paced in realtime mode, and the exit timed: alone on the machine
@pytest.mark.parametrize("mode", ["blocking", "realtime"])
@pytest.mark.parametrize("sig", SIGNALS, ids=lambda s: signal.Signals(s).name)
def test_a_signal_during_an_episode_stops_cleanly_and_logs_it(spares, tmp_path, sig, mode):
    if mode == "blocking":
        runner, log = spares.take()
    else:  # a realtime runner ticks while it waits: started here
        log = tmp_path / "run.h5"
        runner = ServedRunner(channel_name(), task="reach", log=log, mode=mode)
    with runner as s, Client(s.channel, timeout=30) as client:
        before = set(shm_leftovers()) - own_objects(s.channel)
        assert client.start_episode(max_commands=2, episode_id=5).flag == Flag.OK
        replies = []
        if mode == "blocking":  # the episode waits for its second segment
            assert client.send_trajectory(wave(HOME)).flag == Flag.OK
        else:  # a long segment runs in wall-clock time while the signal comes
            segment = np.repeat(HOME[None], int(LONG_SEGMENT / DT), axis=0)
            sender = threading.Thread(target=lambda: replies.append(client.send_trajectory(segment)))
            sent = time.perf_counter()
            sender.start()
            time.sleep(IN_SEGMENT)
        signalled = time.perf_counter()
        took = signal_and_time(s, sig)
        print(f"{signal.Signals(sig).name} in {mode} mode: exit {took * 1e3:.0f} ms after the signal")
        assert s.proc.returncode == 0, s.stderr_text()
        assert took < EXIT_BOUND
        assert set(shm_leftovers()) == before  # its own removed by the runner itself
        if mode == "realtime":
            sender.join(10)
            (reply,) = replies
            assert reply.flag == Flag.INTERRUPTED and reply.episode_done
    (ep,) = read_episodes(log)
    assert ep.attrs["episode_id"] == 5 and ep.attrs["flag"] == Flag.INTERRUPTED
    if mode == "blocking":
        assert np.count_nonzero(ep.steps["index"] == 1) == 500  # the finished segment, whole
    else:  # the segment stopped at the tick after the signal, its steps so far logged
        logged = np.count_nonzero(ep.steps["index"] == 1)
        assert ep.segments["flag"][-1] == Flag.INTERRUPTED and logged == reply.n_steps
        assert 0.5 * IN_SEGMENT / DT < logged < (signalled - sent + 0.2) / DT


@pytest.mark.serial  # the exit timed: alone on the machine
@pytest.mark.parametrize("work", ["segment", "batch"])
def test_a_signal_ends_a_long_compiled_run_within_a_control_step(spares, work):
    """A blocking runner in the compiled loop (one 20 000-sample segment held 60 s: 50 000
    control steps, about 2 s of computing; or a batch of eight of them, 15 s) gets SIGTERM
    0.3 s in: it stops before the loop's next control step and exits within EXIT_BOUND, its own
    unfinished episode logged INTERRUPTED (the runner used to finish the command first)."""
    runner, log = spares.take()
    with runner as s, Client(s.channel, timeout=120) as client:
        start = client.start_episode(max_commands=1, episode_id=7)
        q = wave(start.posture, n=20_000, amplitude=0.05)
        if work == "segment":
            call = lambda: client.send_trajectory(q, wait_time=60)  # noqa: E731
        else:
            episode = [StartCommand(1, 1), TrajectoryCommand(1, 1, 1, q, wait_time=60)]
            call = lambda: client.evaluate([episode] * 8)  # noqa: E731
        outcome: list[BaseException] = []

        def send() -> None:
            try:
                call()
            except RunnerGone as exc:
                outcome.append(exc)

        sender = threading.Thread(target=send)
        sender.start()
        time.sleep(0.3)
        took = signal_and_time(s, signal.SIGTERM)
        sender.join(10)
        assert s.proc.returncode == 0, s.stderr_text()
        assert took < EXIT_BOUND, took
        assert len(outcome) == 1  # the command in hand is not answered: the runner is gone
    (ep,) = read_episodes(log)
    assert ep.attrs["episode_id"] == 7 and ep.attrs["flag"] == Flag.INTERRUPTED
