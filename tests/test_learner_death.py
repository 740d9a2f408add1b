"""A learner that dies, and a learner whose call timed out: real `episodic serve` processes (blocking
and realtime), real learner processes killed outright, real shared memory and HDF5 logs.

A dead learner's episode ends at once with its own flag (LEARNER_GONE: not ABORTED_BY_LEARNER when
a new learner's start comes first, not TIMEOUT), the robot holds, and a new learner is served at
once, in realtime too, where the dead learner's long segment is cut at the next tick. A call
that timed out and is made again waits for the reply to the command already sent, so the episode
goes on instead of ending OUT_OF_ORDER."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

from episodic.bridge import Client
from episodic.interface.commands import StartCommand, TrajectoryCommand
from episodic.interface.vocabulary import Flag
from episodic.logs import read_episodes
from tests.helpers import ROOT, Served, channel_name, shm_leftovers, wave

pytestmark = pytest.mark.slow  # served runners and learner processes


@pytest.fixture(autouse=True)
def no_leftovers():
    before = shm_leftovers()
    yield
    assert shm_leftovers() == before, "a test left shared-memory objects behind"


def learner(channel: str, code: str) -> subprocess.Popen:
    """A Python learner attached to ``channel`` as ``c`` running ``code``; 'ready' once it has."""
    script = (f"import os, sys, time, numpy as np\nfrom episodic.bridge import Client\nfrom tests.helpers import wave\n"
              f"c = Client({channel!r}, timeout=60)\n{code}")
    return subprocess.Popen([sys.executable, "-c", script], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)


def by_id(log) -> dict:
    return {int(e.attrs["episode_id"]): e for e in read_episodes(log)}


@pytest.mark.parametrize("pause", [0.0, 0.5], ids=["next-start-at-once", "found-while-waiting"])
def test_a_dead_learners_episode_ends_learner_gone_before_the_next_learners_start(tmp_path, pause):
    """The learner dies between segments; a new learner starts an episode at once (before the
    runner's next look at the dead one), or after the runner has found it dead by itself."""
    log = tmp_path / "run.h5"
    with Served(channel_name(), log) as s:
        dead = learner(s.channel, "r = c.start_episode(max_commands=3, episode_id=11)\n"
                                  "c.send_trajectory(wave(r.posture))\nos._exit(0)\n")
        assert dead.wait(60) == 0, dead.stderr.read()
        time.sleep(pause)
        with Client(s.channel, timeout=10) as client:
            start = client.send(StartCommand(12, 1))
            assert (start.episode_id, start.flag) == (12, Flag.OK)
            assert client.send(TrajectoryCommand(12, 1, 1, wave(start.posture))).flag == Flag.OK
        assert s.stop() == 0
    episodes = by_id(log)
    assert episodes[11].attrs["flag"] == Flag.LEARNER_GONE, episodes[11].attrs["message"]
    assert f"the learner process {dead.pid} died" in episodes[11].attrs["message"]
    assert list(episodes[11].segments["index"]) == [1] and episodes[12].attrs["flag"] == Flag.OK


@pytest.mark.serial  # paced in real time
def test_in_realtime_a_dead_learners_long_segment_stops_and_a_new_learner_is_served_at_once(tmp_path):
    """The learner sends a 20 s segment held 60 s more and is SIGKILLed 1 s into it: the segment
    stops within a fraction of a second, the episode ends LEARNER_GONE with the robot holding
    where the motion was cut, and a new learner's start is answered as soon as its move to the
    start posture is done (it used to wait out the 80 s)."""
    log = tmp_path / "rt.h5"
    with Served(channel_name(), log, "--mode", "realtime") as s:
        dead = learner(s.channel, "r = c.start_episode(max_commands=2, episode_id=21)\nprint('started', flush=True)\n"
                                  "c.send_trajectory(wave(r.posture, n=10_000, amplitude=0.1), rate=500, "
                                  "wait_time=60)\n")
        assert dead.stdout.readline().strip() == "started", dead.stderr.read()
        time.sleep(1.0)
        dead.kill()
        killed = time.monotonic()
        assert dead.wait(10) == -signal.SIGKILL
        with Client(s.channel, timeout=30) as client:
            start = client.send(StartCommand(22, 1))
            answered = time.monotonic()
            assert (start.episode_id, start.flag) == (22, Flag.OK)
        moving = start.n_steps / 500  # s of the new episode's move to its start, paced
        assert answered - killed - moving < 1.0, (answered - killed, moving)
        assert s.stop() == 0
    episodes = by_id(log)
    gone = episodes[21]
    assert gone.attrs["flag"] == Flag.LEARNER_GONE and f"process {dead.pid} died" in gone.attrs["message"]
    segments = gone.segments
    assert list(segments["index"]) == [1] and list(segments["flag"]) == [Flag.LEARNER_GONE]
    assert 300 < segments["n_steps"][0] < 1000  # cut about 1 s (500 steps) in
    assert gone.attrs["n_steps"] < gone.segments["n_steps"].sum() + 5000  # no 60 s hold after it


def test_a_call_that_timed_out_made_again_waits_for_its_reply_and_the_episode_goes_on(tmp_path):
    """The runner is paused while a segment is sent (SIGSTOP): the call times out; made again
    after the runner goes on, it returns that segment's reply (the segment ran once), and the
    episode goes on to its end. A different segment under the timed-out index is refused before
    anything is sent."""
    log = tmp_path / "run.h5"
    with Served(channel_name(), log) as s:
        with Client(s.channel, timeout=10) as client:
            start = client.start_episode(max_commands=2, episode_id=31)
            q = wave(start.posture)
            client.timeout = 0.3
            os.kill(s.proc.pid, signal.SIGSTOP)
            try:
                with pytest.raises(TimeoutError, match="send the same command again to wait on for its reply"):
                    client.send_trajectory(q)
                with pytest.raises(TimeoutError, match="did not answer"):  # still paused: still no reply
                    client.send_trajectory(q.copy())
                with pytest.raises(ValueError, match="trajectory command 1 of episode 31 was sent already"):
                    client.send_trajectory(q + 0.01)
            finally:
                os.kill(s.proc.pid, signal.SIGCONT)
            client.timeout = 10
            first = client.send_trajectory(q)
            assert (first.index, first.flag, first.episode_done) == (1, Flag.OK, False)
            last = client.send_trajectory(wave(first.posture))
            assert (last.index, last.flag, last.episode_done) == (2, Flag.OK, True)
        assert s.stop() == 0
    (episode,) = read_episodes(log)
    assert episode.attrs["flag"] == Flag.OK and list(episode.segments["index"]) == [1, 2]
    assert np.all(episode.segments["flag"] == Flag.OK)
