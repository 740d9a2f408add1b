"""Non-blocking (real-time) mode with real processes: `episodic serve --mode realtime` paces the
simulation to the wall clock and holds the robot while the learner is late, early, wrong or dead.
No timing assertions: tick statistics are measured by benchmarks/realtime.py."""
from __future__ import annotations

import signal
import subprocess
import sys
import time

import numpy as np
import pytest

from episodic.bridge import Client
from episodic.interface.commands import StartCommand, TrajectoryCommand
from episodic.interface.trajectory import min_jerk
from episodic.interface.vocabulary import Flag, MachineState
from episodic.logs import read_episodes, read_metadata
from episodic.logs.timing import Timing
from episodic.runtime.pacing import Pacer
from episodic.runtime.runner import Runner
from episodic.tasks import make_task
from tests.helpers import ROOT, Served, channel_name, shm_leftovers

# wall-clock paced runners; paced or timed, so alone on the machine
pytestmark = [pytest.mark.slow, pytest.mark.serial]

HOME = np.array([0, 0.5876, 0, 1.36, 0, -0.321, -1.57])
DT = 0.002
GOAL = HOME + np.array([0.3, -0.2, 0.2, 0.3, 0.2, 0.2, 0.3])


def move(a, b, seconds=0.6):
    return min_jerk(a, b, seconds, DT).q


@pytest.fixture(autouse=True)
def no_leftovers():
    before = shm_leftovers()
    yield
    assert shm_leftovers() == before


def realtime(tmp_path, name="rt.h5", timeout="1"):
    return Served(channel_name(), tmp_path / name, "--mode", "realtime", "--learner-timeout", timeout)


def continuous(steps: dict) -> bool:
    return bool(np.allclose(np.diff(steps["time"]), DT, atol=1e-9))


SETTLE = 0.4  # s: the motion before a wait rings out (joint 1 under the default PD gains)


def held_within(steps: dict, waiting: np.ndarray) -> float:
    """Largest |q - q_held| rad over the waits, once SETTLE s into each wait."""
    starts = np.flatnonzero(np.diff(np.concatenate([[False], waiting]).astype(int)) == 1)
    settled = waiting.copy()
    for start in starts:
        settled[start : start + int(SETTLE / DT)] = False
    assert settled.any()
    return float(np.abs(steps["q"][settled] - steps["q_d"][settled]).max())


DYING_LEARNER = """
import os, sys, numpy as np
from episodic.bridge import Client

c = Client(sys.argv[1], timeout=10)
c.start_episode(max_commands=5, episode_id=9)
os._exit(0)
"""


def test_the_tick_statistics_between_two_marks_count_the_ticks_between():
    pacer = Pacer(0.001)
    for _ in range(5):
        pacer.wait()
    start = pacer.mark()
    for _ in range(7):
        pacer.wait()
    end = pacer.mark()
    assert Timing.between(start, end).ticks == 7 and Timing.between(None, end).ticks == 12
    assert Timing.between(start, end) == pacer.timing(since=start)
    assert Timing.between(None, end).period_error_max >= Timing.between(start, end).period_error_max


def test_late_early_malformed_and_dead_learners(tmp_path):
    with realtime(tmp_path) as s:
        with Client(s.channel, timeout=10) as client:
            assert client.start_episode(max_commands=3, episode_id=1).flag == Flag.OK
            time.sleep(0.3)                                       # late for the first segment
            assert client.send_trajectory(move(HOME, GOAL)).flag == Flag.OK
            time.sleep(0.8)                                       # late again
            assert client.send_trajectory(move(GOAL, HOME)).flag == Flag.OK
            assert client.send_trajectory(move(HOME, GOAL)).flag == Flag.OK  # early: at once
            bad = move(GOAL, HOME)
            bad[5, 1] = np.nan
            assert client.start_episode(max_commands=2, episode_id=2).flag == Flag.OK
            reply = client.send_trajectory(bad)
            assert reply.flag == Flag.INVALID_PAYLOAD and "NaN" in reply.message
        subprocess.run([sys.executable, "-c", DYING_LEARNER, s.channel], cwd=ROOT, check=True, timeout=60)
        time.sleep(1.0)                                           # the runner notices and holds
        with Client(s.channel, timeout=10) as client:             # and serves the next learner
            assert client.start_episode(max_commands=1, episode_id=3).flag == Flag.OK
            assert client.send_trajectory(move(HOME, GOAL)).flag == Flag.OK
        assert s.stop() == 0
    first, second, dead, last = read_episodes(tmp_path / "rt.h5")
    assert [e.attrs["flag"] for e in (first, second, dead, last)] == [
        Flag.OK, Flag.INVALID_PAYLOAD, Flag.LEARNER_GONE, Flag.OK]
    steps = first.steps
    assert continuous(steps), "every tick of the episode is logged"
    waiting = np.isin(steps["machine_state"], [MachineState.WAIT_FOR_START, MachineState.WAIT_FOR_COMMAND])
    assert waiting.sum() >= 0.7 * 1.1 / DT                       # the two late waits were held and logged
    assert held_within(steps, waiting) < 0.01
    # the early segment was taken within a few ticks of the previous one's end
    third = np.flatnonzero(steps["index"] == 3)[0]
    second_end = np.flatnonzero(steps["index"] == 2)[-1]
    assert steps["machine_state"][second_end + 1] in (MachineState.DO_MOTION, MachineState.WAIT_FOR_COMMAND)
    assert third - second_end < 50
    assert dead.attrs["n_steps"] > 0 and continuous(dead.steps)
    held = dead.steps["machine_state"] == MachineState.WAIT_FOR_START   # until the runner saw it die
    assert held.any() and np.abs(dead.steps["q"][held] - dead.steps["q_d"][held]).max() < 0.01
    # the robot went on holding after the abort: the next episode found it at rest where it was
    np.testing.assert_allclose(last.steps["q"][0], dead.steps["q"][-1], atol=0.01)
    assert np.abs(last.steps["qd"][0]).max() < 0.01
    assert "timing_period_error_p99" in first.attrs and first.attrs["timing_ticks"] == first.attrs["n_steps"]
    meta = read_metadata(tmp_path / "rt.h5")
    assert meta["mode"] == "realtime" and meta["timing_ticks"] > 0


def test_blocking_and_realtime_give_the_same_motion(tmp_path):
    commands = [StartCommand(1, 2), TrajectoryCommand(1, 1, 2, move(HOME, GOAL)),
                TrajectoryCommand(1, 2, 2, move(GOAL, HOME), wait_time=0.2)]
    with Runner(make_task("reach"), log=tmp_path / "blocking.h5") as r:
        assert [r.send(c).flag for c in commands] == [Flag.OK] * 3
    with realtime(tmp_path, "realtime.h5") as s:
        with Client(s.channel, timeout=10) as client:
            assert [client.send(c).flag for c in commands] == [Flag.OK] * 3
        assert s.stop() == 0
    (b,), (rt,) = read_episodes(tmp_path / "blocking.h5"), read_episodes(tmp_path / "realtime.h5")
    mb, mr = (e.steps["machine_state"] == MachineState.DO_MOTION for e in (b, rt))
    qb, qr = b.steps["q"][mb], rt.steps["q"][mr]
    assert qb.shape == qr.shape
    # the realtime robot holds for the ticks between commands while the blocking one stops in
    # time; the start is at rest, so the first segment agrees closely; the second starts while
    # the arm still rings from the first, a few held ticks later
    first = b.steps["index"][mb] == 1
    print("max |q_blocking - q_realtime| rad: first segment", np.abs(qb - qr)[first].max(),
          "both", np.abs(qb - qr).max())
    assert np.abs(qb - qr)[first].max() < 1e-4
    assert np.abs(qb - qr).max() < 2e-3
    np.testing.assert_array_equal(b.steps["q_d"][mb], rt.steps["q_d"][mr])


def test_safety_abort_in_realtime_stops_at_the_tick_and_holds(tmp_path):
    jump = np.repeat(HOME[None], 400, axis=0)
    jump[10:, 0] += 1.5
    with realtime(tmp_path) as s:
        with Client(s.channel, timeout=10) as client:
            client.start_episode(max_commands=1, episode_id=1)
            reply = client.send_trajectory(jump)
            assert reply.flag == Flag.SAFETY_ABORT and 10 < reply.n_steps < 400
            time.sleep(2.0)                                       # the robot brakes and holds
            assert client.start_episode(max_commands=1, episode_id=2).flag == Flag.OK
            log = client.get_episode()
        assert s.stop() == 0
    first = read_episodes(tmp_path / "rt.h5")[0]
    motion = first.steps["machine_state"] == MachineState.DO_MOTION
    assert motion.sum() == reply.n_steps  # the segment ended at the tick that tripped
    assert np.abs(first.steps["qd"][motion]).max(axis=0)[0] <= 2.39  # logged steps within j1's limit
    # after the abort the next episode's go-to-start began from a robot at rest
    assert np.abs(log["qd"][0]).max() < 0.05


def test_replay_refuses_a_realtime_log(tmp_path):
    from episodic.tools.replay import replay

    with realtime(tmp_path) as s:
        with Client(s.channel, timeout=10) as client:
            client.start_episode(max_commands=1, episode_id=1)
            client.send_trajectory(move(HOME, GOAL))
        assert s.stop() == 0
    with pytest.raises(ValueError, match="blocking"):
        replay(tmp_path / "rt.h5")


def test_finished_episodes_reach_the_disk_while_the_learner_leaves_no_idle_tick(tmp_path):
    """A prompt learner runs short episodes back to back, so the runner has almost no tick to
    spare between commands; a SIGKILL then finds every episode that finished over 1 s earlier
    on disk, readable."""
    log = tmp_path / "kill.h5"
    finished = {}  # episode id -> time.monotonic() of the reply that ended it
    with realtime(tmp_path, log.name) as s:
        with Client(s.channel, timeout=10) as client:
            end = time.monotonic() + 4.0
            episode_id = 0
            while time.monotonic() < end:
                episode_id += 1
                start = client.start_episode(max_commands=1, episode_id=episode_id)
                reply = client.send_trajectory(np.repeat(start.posture[None], 50, axis=0))
                assert reply.flag == Flag.OK and reply.episode_done
                finished[episode_id] = time.monotonic()
            s.proc.send_signal(signal.SIGKILL)
            killed = time.monotonic()
            s.proc.wait(10)
    on_disk = {e.attrs["episode_id"] for e in read_episodes(log)}
    due = {i for i, t in finished.items() if t < killed - 1.0}
    print(f"{len(finished)} episodes finished, {len(due)} over 1 s before the kill, {len(on_disk)} on disk")
    assert len(due) >= 10 and due <= on_disk
