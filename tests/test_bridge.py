"""The shared-memory bridge with real processes: `episodic serve` in a subprocess, real
POSIX shared memory and semaphores, real HDF5 logs."""
from __future__ import annotations

import os
import signal
import stat
import subprocess
import sys
import time
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
import posix_ipc
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from episodic.bridge import Client, ProtocolError, RunnerGone
from episodic.bridge.blocks import Blocks
from episodic.bridge.channel import Channel, object_names, remove
from episodic.bridge.layout import COMMAND, MAGIC, VERSION
from episodic.interface.commands import GainsCommand, StartCommand, TrajectoryCommand
from episodic.interface.robot import load_robot
from episodic.interface.vocabulary import Flag, MachineState
from episodic.logs import read_episodes
from episodic.runtime.runner import Runner
from episodic.tasks import make_task
from tests.helpers import (
    ROOT,
    Served,
    assert_same_steps,
    channel_name,
    raw_channel,
    raw_exchange,
    shared_runner,
    shm_leftovers,
    wave,
)

pytestmark = pytest.mark.slow  # real `episodic serve` processes

HOME = np.array([0, 0.5876, 0, 1.36, 0, -0.321, -1.57])
CONTEXT = [0.5, 0.2, 1.5]


@pytest.fixture(autouse=True)
def no_leftovers():
    before = shm_leftovers()
    yield
    assert shm_leftovers() == before, "a test left shared-memory objects behind"


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """One logging runner with a 1 s learner timeout for the tests below that need a runner
    serving and leave it serving (each starts its own episodes; shared_runner checks at the end
    that it still serves and exits cleanly)."""
    with shared_runner(tmp_path_factory.mktemp("served") / "served.h5", "--learner-timeout", "1") as s:
        yield s


def episode_over_bridge(client: Client, episode_id: int, n_segments: int = 3):
    replies = [client.start_episode(context=CONTEXT, max_commands=n_segments, episode_id=episode_id)]
    replies += [client.send_trajectory(wave(HOME, phase=0.1 * k)) for k in range(n_segments)]
    return replies


def test_episode_round_trip_and_log_fetch(served):
    with Client(served.channel, timeout=10) as client:
        assert client.sizes.n_dofs == 7 and client.sizes.state_names[-1] == "distance"
        replies = episode_over_bridge(client, 1)
        assert [r.flag for r in replies] == [Flag.OK] * 4
        assert replies[-1].episode_done and replies[-1].machine_state == MachineState.RESTART
        np.testing.assert_allclose(replies[-1].state[:3], CONTEXT)
        log = client.get_episode()
    motion = log["machine_state"] == MachineState.DO_MOTION
    assert motion.sum() == 1500 and log["q"].shape == (len(log["time"]), 7)
    assert log["reward"][motion].sum() == pytest.approx(sum(r.reward for r in replies[1:]))
    np.testing.assert_array_equal(log["distance"], log["task_state"][:, 3])


def test_bridge_log_is_bit_identical_to_in_process(tmp_path):
    robot_kp = np.array([200, 300, 100, 100, 10, 10, 2.5])
    commands = [StartCommand(1, 4, context=np.array(CONTEXT)),
                GainsCommand(1, 1, 4, 0.5 * robot_kp, 0.05 * robot_kp, feedforward="inverse_dynamics", wait_time=0.05)]
    commands += [TrajectoryCommand(1, k + 2, 4, wave(HOME, phase=0.1 * k), rate=250.0 * (k + 1)) for k in range(2)]
    commands += [TrajectoryCommand(1, 4, 4, wave(HOME), wait_time=0.1)]
    channel = channel_name()
    with Served(channel, tmp_path / "bridge.h5", "--seed", "7") as s:
        with Client(channel, timeout=10) as client:
            replies = [client.send(c) for c in commands]
            fetched = client.get_episode()
        assert s.stop() == 0
    assert [r.flag for r in replies] == [Flag.OK] * 5
    with Runner(make_task("reach"), log=tmp_path / "local.h5", seed=7) as r:
        local_replies = [r.send(c) for c in commands]
    assert [r.reward for r in replies] == [r.reward for r in local_replies]
    assert [r.posture.tobytes() for r in replies] == [r.posture.tobytes() for r in local_replies]
    (bridged,), (local,) = read_episodes(tmp_path / "bridge.h5"), read_episodes(tmp_path / "local.h5")
    assert_same_steps(local, bridged, fetched)
    assert bridged.attrs["return"] == local.attrs["return"]


# -- how an episode ended, in the reply that ends it (tests/test_clients.py: the same from C and Octave) --
@dataclass(frozen=True)
class Ending:
    """A reach episode of one command after its start, sent by every client's test alike: the
    start posture held ``samples`` samples ("hold"), or joint 1 stepped by 1.5 rad after 10 samples
    so that its PD drives it past its velocity limit ("jump"), or the learner's reset ("reset").
    ``at_target``: the target is where the end effector starts (holding still reaches it), else
    CONTEXT. ``flag`` and ``success``: how the episode must end; ``charged``: whether it ends
    before reach's 1.2 s horizon, so the runner charges the rest."""

    name: str
    at_target: bool
    motion: str
    samples: int
    flag: Flag
    success: bool
    charged: bool


HORIZON = 1.2  # s, reach's default horizon: every episode is scored over this much motion
ENDINGS = (
    Ending("solved", True, "hold", 600, Flag.OK, True, False),
    Ending("missed", False, "hold", 600, Flag.OK, False, False),
    Ending("short", False, "hold", 100, Flag.OK, False, True),  # 0.2 s of the 1.2 s
    Ending("aborted", False, "jump", 400, Flag.SAFETY_ABORT, False, True),
    Ending("reset", False, "reset", 0, Flag.ABORTED_BY_LEARNER, False, True),  # no motion: the whole horizon
)


class Seen(NamedTuple):
    """What a client's reply says of its episode (a Python Reply's fields, or a C or Octave
    program's printed line)."""

    flag: int
    done: bool
    success: bool
    reward: float
    episode_return: float
    n_steps: int

    @classmethod
    def of(cls, reply) -> Seen:
        return cls(reply.flag, reply.episode_done, reply.success, reply.reward, reply.episode_return, reply.n_steps)


def reachable_target() -> np.ndarray:
    """(3,) m: where reach's end effector is at the task's start posture (a target there is reached
    by holding still)."""
    with Runner(make_task("reach")) as r:
        r.start_episode(context=CONTEXT)
        return r.sim.data.site(r.robot.end_effector_site).xpos.copy()


def send_ending(sender, ending: Ending, target: np.ndarray) -> list:
    """The start and the one command of ``ending`` (at ``target`` when ``ending.at_target``); their replies."""
    start = sender.start_episode(1, context=target if ending.at_target else CONTEXT)
    if ending.motion == "reset":
        return [start, sender.reset()]
    q = np.repeat(start.posture[None], ending.samples, axis=0)
    if ending.motion == "jump":
        q[10:, 0] += 1.5
    return [start, sender.send_trajectory(q)]


def assert_endings(seen: list[list[Seen]], logged: list) -> None:
    """The replies of the ENDINGS episodes, one list per episode, against the runner's log: only the
    reply that ends an episode says done; it carries the flag and success the log records (success
    only in the solved one), and the log's return bit for bit, the early end's charge included
    (the rest of the horizon at one worst cost rate, so a cut episode returns less than the same
    target held the whole horizon); every reply's return is its episode's rewards so far."""
    assert len(seen) == len(logged) == len(ENDINGS)
    returns = {}
    rate = logged[-1].attrs["early_end"] / HORIZON  # the reset: charged the whole horizon, per s
    assert rate < 0
    for ending, replies, episode in zip(ENDINGS, seen, logged):
        *before, last = replies
        assert [(r.flag, r.done, r.success) for r in before] == [(Flag.OK, False, False)] * len(before), ending.name
        assert [r.episode_return for r in replies] == pytest.approx(np.cumsum([r.reward for r in replies]),
                                                                   rel=1e-12, abs=0), ending.name
        assert (last.flag, last.done, last.success) == (ending.flag, True, ending.success), ending.name
        assert (episode.attrs["flag"], bool(episode.attrs["success"])) == (ending.flag, ending.success)
        assert last.episode_return == episode.attrs["return"], ending.name  # bit for bit
        motion = last.n_steps  # control steps of motion the episode ran (a reset runs none)
        if ending.motion == "jump":
            assert 0 < motion < ending.samples, ending.name  # cut where a joint went over its velocity limit
        else:
            assert motion == ending.samples, ending.name
        charge = rate * (HORIZON - motion / 500) if ending.charged else 0.0
        assert episode.attrs["early_end"] == pytest.approx(charge, rel=1e-12, abs=0), ending.name
        assert episode.attrs["return"] == pytest.approx(episode.segments["reward"].sum() + charge, rel=1e-12)
        returns[ending.name] = last.episode_return
    assert max(returns["short"], returns["aborted"], returns["reset"]) < returns["missed"] < returns["solved"]


def test_the_reply_that_ends_an_episode_says_how_and_the_logs_return(tmp_path):
    target = reachable_target()
    with Served(channel_name(), tmp_path / "served.h5") as s:
        with Client(s.channel, timeout=10) as client:
            seen = [[Seen.of(r) for r in send_ending(client, ending, target)] for ending in ENDINGS]
        assert s.stop() == 0
    assert_endings(seen, read_episodes(tmp_path / "served.h5"))


def test_the_log_block_holds_an_episodes_first_rows_as_copies_or_views():
    """After every command the log block holds the episode's steps so far, bit for bit the
    in-process runner's, up to --max-log-steps rows (here reached in a segment, and in the go-to-start's
    many per-step blocks); fetched as copies, or as read-only views into the block."""
    episodes = [[StartCommand(e, 2, context=np.array(CONTEXT)), TrajectoryCommand(e, 1, 2, wave(HOME)),
                 TrajectoryCommand(e, 2, 2, wave(HOME, phase=0.3))] for e in (1, 2)]
    channel = channel_name()
    with Served(channel, None, "--max-log-steps", "300"), Client(channel, timeout=10) as client, \
            Runner(make_task("reach")) as local:
        for command in [c for commands in episodes for c in commands]:
            assert client.send(command).flag == local.send(command).flag == Flag.OK
            expected, copies, views = local.get_episode(), client.get_episode(), client.get_episode(copy=False)
            n = min(len(expected["time"]), 300)
            for name, values in expected.items():
                assert copies[name].tobytes() == views[name].tobytes() == values[:n].astype(float).tobytes(), name
                assert copies[name].flags.writeable and not views[name].flags.writeable
    assert len(expected["time"]) > 300


def test_replies_say_where_the_next_segment_starts():
    """Over the bridge: the start reply's posture is ball_in_cup's start posture (not the home
    posture on j6, j7); a segment begun there runs; one begun elsewhere is refused with a message
    that gives the posture held."""
    robot = load_robot("wam")
    expected = make_task("ball_in_cup").start_posture(robot)
    with Served(channel_name(), task="ball_in_cup") as s, Client(s.channel, timeout=10) as client:
        start = client.start_episode(max_commands=2)
        assert start.flag == Flag.OK and start.posture.shape == (7,)
        np.testing.assert_allclose(start.posture, expected, rtol=0, atol=robot.goto.tolerance_q)
        np.testing.assert_array_equal(np.flatnonzero(start.posture != robot.home), [5, 6])
        q = wave(start.posture, amplitude=0.1, phase=0.3)
        first = client.send_trajectory(q)
        assert first.flag == Flag.OK, first.message
        np.testing.assert_array_equal(first.posture, robot.clamp(q[-1]))
        far = client.send_trajectory(wave(first.posture) + np.array([0.3, 0, 0, 0, 0, 0, 0]))
    assert far.flag == Flag.DISCONTINUOUS and far.n_steps == 0
    np.testing.assert_array_equal(far.posture, first.posture)
    assert f"{(np.round(first.posture, 4) + 0.0).tolist()} rad (the last reply's posture)" in far.message


LEARNER_THAT_DIES = """
import os, sys, numpy as np
from episodic.bridge import Client
from tests.helpers import wave

home = np.array([0, 0.5876, 0, 1.36, 0, -0.321, -1.57])
c = Client(sys.argv[1], timeout=10)
c.start_episode(max_commands=3, episode_id=11)
c.send_trajectory(wave(home))
os._exit(0)   # dies mid-episode without a word
"""


def test_learner_killed_mid_episode(tmp_path):
    channel = channel_name()
    log = tmp_path / "run.h5"
    with Served(channel, log, "--learner-timeout", "1") as s:
        subprocess.run([sys.executable, "-c", LEARNER_THAT_DIES, channel], cwd=ROOT, check=True, timeout=60)
        time.sleep(1.5)  # past the learner timeout
        with Client(channel, timeout=10) as client:
            assert [r.flag for r in episode_over_bridge(client, 12)] == [Flag.OK] * 4
        assert s.stop() == 0
    first, second = read_episodes(log)
    assert first.attrs["episode_id"] == 11 and first.attrs["flag"] == Flag.LEARNER_GONE
    assert first.attrs["n_steps"] >= 500
    assert second.attrs["episode_id"] == 12 and second.attrs["flag"] == Flag.OK


def test_runner_killed_mid_episode_client_raises_within_timeout(tmp_path):
    channel = channel_name()
    s = Served(channel)
    try:
        with Client(channel, timeout=5) as client:
            client.start_episode(max_commands=3, episode_id=1)
            s.stop(signal.SIGKILL)
            t0 = time.monotonic()
            with pytest.raises(RunnerGone, match=channel):
                client.send_trajectory(wave(HOME))
            assert time.monotonic() - t0 < 5
        # a new runner replaces the dead one's leftovers
        with Served(channel) as again:
            with Client(channel) as client:
                assert client.runner_pid == again.proc.pid
                assert client.start_episode().flag == Flag.OK
    finally:
        remove(channel)


def test_silent_runner_gives_timeout_error_naming_the_channel(served):
    with Client(served.channel, timeout=0.5) as client:
        os.kill(served.proc.pid, signal.SIGSTOP)
        try:
            with pytest.raises(TimeoutError, match=served.channel):
                client.start_episode()
        finally:
            os.kill(served.proc.pid, signal.SIGCONT)
        # the late reply to the timed-out command is skipped, not mistaken for the next one
        reply = client.start_episode(context=CONTEXT, episode_id=5)
        assert reply.flag == Flag.OK and reply.episode_id == 5


def test_two_channels_side_by_side(served, tmp_path):
    a, b = served.channel, channel_name()
    with Served(b, tmp_path / "b.h5"):
        with Client(a) as ca, Client(b) as cb:
            ca.start_episode(context=[0.5, 0.2, 1.5], max_commands=2, episode_id=1)
            cb.start_episode(context=[0.6, -0.2, 1.3], max_commands=2, episode_id=2)
            for _ in range(2):
                ra = ca.send_trajectory(wave(HOME))
                rb = cb.send_trajectory(wave(HOME, amplitude=0.1))
            np.testing.assert_allclose(ra.state[:3], [0.5, 0.2, 1.5])
            np.testing.assert_allclose(rb.state[:3], [0.6, -0.2, 1.3])
            assert len(ca.get_episode()["time"]) == len(cb.get_episode()["time"])
            assert not np.array_equal(ca.get_episode()["q"], cb.get_episode()["q"])


def test_second_runner_on_a_live_channel_is_refused(served):
    second = Served(served.channel)
    assert second.proc.wait(timeout=60) != 0
    assert "live runner" in second.proc.stderr.read()
    with Client(served.channel) as client:  # the first one still serves
        assert client.runner_pid == served.proc.pid
        assert client.start_episode().flag == Flag.OK


def test_objects_are_owner_only(served):
    mode = os.stat("/dev/shm" + object_names(served.channel)["shm"]).st_mode
    assert stat.S_IMODE(mode) == 0o600


def test_client_refuses_another_protocol_version(served):
    chan = Channel.attach(served.channel)
    blocks = Blocks(chan.mm, chan.layout)
    try:
        blocks.header["version"] = VERSION + 1
        with pytest.raises(ProtocolError, match="version"):
            Client(served.channel)
    finally:
        blocks.header["version"] = VERSION
        blocks.release()
        chan.mm.close()


@pytest.fixture
def raw(served):
    with raw_channel(served.channel) as (chan, blocks):
        yield served, chan, blocks


def fill_valid_trajectory(blocks: Blocks, n: int = 10):
    c = blocks.command
    c["magic"], c["version"], c["client_pid"] = MAGIC, VERSION, os.getpid()
    c["episode_id"], c["index"], c["max_commands"], c["kind"], c["n_samples"] = 1, 1, 1, 1, n
    blocks.command_arrays["q"][:n] = HOME


@pytest.mark.parametrize("field, value, words", [
    ("magic", b"WRONGMAG", "protocol"),
    ("magic", bytes(8), "magic '\\x00\\x00"),
    ("version", VERSION + 1, "version"),
    ("version", VERSION - 1, f"version {VERSION - 1}; this runner speaks protocol version {VERSION}"),
    ("n_samples", 10**9, "n_samples"),
    ("n_samples", -1, "n_samples"),
    ("kind", 42, "kind"),
])
def test_bad_command_block_fields_get_the_invalid_flag(raw, field, value, words):
    served, chan, blocks = raw
    fill_valid_trajectory(blocks)
    blocks.command[field] = value
    reply = raw_exchange(chan, blocks)
    assert reply["flag"] == Flag.INVALID_PAYLOAD and words in reply["message"].item().decode()
    assert served.proc.poll() is None


def test_nan_and_context_over_the_limit(raw):
    served, chan, blocks = raw
    fill_valid_trajectory(blocks)
    blocks.command_arrays["q"][3, 2] = np.nan
    assert raw_exchange(chan, blocks)["flag"] == Flag.INVALID_PAYLOAD
    blocks.command["kind"], blocks.command["index"] = 0, 0
    blocks.command["n_context"] = chan.layout.sizes.max_context + 1
    assert raw_exchange(chan, blocks)["flag"] == Flag.INVALID_PAYLOAD


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.binary(min_size=COMMAND.itemsize, max_size=COMMAND.itemsize))
def test_random_command_bytes_never_break_the_runner(raw, data):
    served, chan, blocks = raw
    start = chan.layout.command_offset
    chan.mm[start : start + COMMAND.itemsize] = data
    seq = int(time.monotonic_ns())
    reply = raw_exchange(chan, blocks, seq)
    assert int(reply["flag"]) in {f.value for f in Flag}
    assert served.proc.poll() is None


def test_runner_still_serves_after_garbage(raw):
    served, chan, blocks = raw
    chan.mm[chan.layout.command_offset : chan.layout.command_offset + COMMAND.itemsize] = os.urandom(COMMAND.itemsize)
    raw_exchange(chan, blocks)
    with Client(served.channel) as client:
        assert [r.flag for r in episode_over_bridge(client, 77, n_segments=1)] == [Flag.OK] * 2


def test_sigint_stops_the_runner_cleanly(tmp_path):
    channel = channel_name()
    s = Served(channel, tmp_path / "run.h5")
    with Client(channel) as client:
        client.start_episode(max_commands=2, episode_id=3)
        client.send_trajectory(wave(HOME))
    assert s.stop(signal.SIGINT) == 0
    (ep,) = read_episodes(tmp_path / "run.h5")
    assert ep.attrs["flag"] == Flag.INTERRUPTED and ep.attrs["n_steps"] >= 500
    with pytest.raises(FileNotFoundError, match="no runner serves"):
        Client(channel)
    with pytest.raises(posix_ipc.ExistentialError):
        posix_ipc.Semaphore(object_names(channel)["cmd"])


def test_learner_back_after_its_timeout_is_told_so(served):
    with Client(served.channel, timeout=10) as client:
        client.start_episode(max_commands=2, episode_id=21)
        time.sleep(1.6)  # the runner's learner timeout is 1 s
        reply = client.send_trajectory(wave(HOME))
    assert reply.flag == Flag.TIMEOUT and "aborted" in reply.message


def test_a_command_is_never_written_over_one_the_runner_has_not_taken(tmp_path):
    """The client gave up on a command while the runner could not take it: the next command is not
    written over it (it says it was not sent); the posted one runs once, then the new ones run."""
    channel = channel_name()
    log = tmp_path / "run.h5"
    with Served(channel, log) as s:
        with Client(channel, timeout=0.3) as client:
            os.kill(s.proc.pid, signal.SIGSTOP)
            try:
                with pytest.raises(TimeoutError, match="did not answer"):
                    client.start_episode(max_commands=1, episode_id=31)
                with pytest.raises(TimeoutError, match="this command was not sent"):
                    client.start_episode(max_commands=1, episode_id=32)
            finally:
                os.kill(s.proc.pid, signal.SIGCONT)
            client.timeout = 10
            assert client.start_episode(max_commands=1, episode_id=33).flag == Flag.OK
            assert client.send_trajectory(wave(HOME)).flag == Flag.OK
        assert s.stop() == 0
    assert [e.attrs["episode_id"] for e in read_episodes(log)] == [31, 33]


def test_a_lock_held_by_a_dead_process_is_taken_over_once(monkeypatch):
    from episodic.bridge import channel as ch

    monkeypatch.setattr(ch, "LOCK_TIMEOUT", 0.05)
    name = f"/episodic-locktest-{os.getpid()}"
    sem = posix_ipc.Semaphore(name, posix_ipc.O_CREX, mode=0o600, initial_value=0)  # held, holder gone
    try:
        with ch.locked(sem):
            assert sem.value == 0
        assert sem.value == 1
        with ch.locked(sem):  # an ordinary acquire now
            assert sem.value == 0
        assert sem.value == 1
    finally:
        sem.unlink()
        sem.close()


def test_an_exited_child_counts_as_gone_before_it_is_reaped():
    from episodic.bridge.channel import pid_alive

    child = subprocess.Popen([sys.executable, "-c", "pass"])
    deadline = time.monotonic() + 10
    while pid_alive(child.pid) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert not pid_alive(child.pid) and child.returncode is None  # exited, not yet waited for
    child.wait()
    assert pid_alive(os.getpid())
