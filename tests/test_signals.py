"""Every terminating signal stops `episodic serve` cleanly, with real processes: SIGINT, SIGTERM,
SIGHUP and SIGQUIT, in blocking and in realtime mode, during an episode (realtime: during a long
paced segment, which stops at the next tick) and right after start-up. The runner exits within
EXIT_BOUND s, leaves no shared-memory object behind and logs the unfinished episode with
Flag.INTERRUPTED."""
from __future__ import annotations

import signal
import threading
import time

import numpy as np
import pytest

from episodic.bridge import Client, RunnerGone
from episodic.interface.commands import StartCommand, TrajectoryCommand
from episodic.interface.vocabulary import Flag
from episodic.logs import read_episodes
from episodic.tools.served import ServedRunner
from tests.helpers import Served, channel_name, shm_leftovers, wave

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
    assert shm_leftovers() == before


def signal_and_time(runner: ServedRunner, sig: int) -> float:
    """Send ``sig`` to the runner and wait for its exit; the s that took."""
    start = time.perf_counter()
    runner.proc.send_signal(sig)
    runner.proc.wait(timeout=30)
    return time.perf_counter() - start


@pytest.mark.serial  # wall-clock paced in realtime mode, and the exit timed: alone on the machine
@pytest.mark.parametrize("mode", ["blocking", "realtime"])
@pytest.mark.parametrize("sig", SIGNALS, ids=lambda s: signal.Signals(s).name)
def test_a_signal_during_an_episode_stops_cleanly_and_logs_it(tmp_path, sig, mode):
    log = tmp_path / "run.h5"
    before = shm_leftovers()
    with Served(channel_name(), log, "--mode", mode) as s, Client(s.channel, timeout=30) as client:
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
        assert shm_leftovers() == before  # removed by the runner itself
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


@pytest.mark.serial  # the exit timed: alone on the machine
@pytest.mark.parametrize("work", ["segment", "batch"])
def test_a_signal_ends_a_long_compiled_run_within_a_control_step(tmp_path, work):
    """A blocking runner in the compiled loop (one 20 000-sample segment held 60 s: 50 000
    control steps, about 2 s of computing; or a batch of eight of them, 15 s) gets SIGTERM
    0.3 s in: it stops before the loop's next control step and exits within EXIT_BOUND, its own
    unfinished episode logged INTERRUPTED (the runner used to finish the command first)."""
    log = tmp_path / "run.h5"
    with Served(channel_name(), log) as s, Client(s.channel, timeout=120) as client:
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
