"""One client per channel, each reply to its own command, no command lost: real runners, real
client processes (killed, paused), real shared memory. Also the header and channel-name checks
of the Python client against corrupted headers in a real shared-memory object."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from episodic.bridge import Client, ProtocolError
from episodic.bridge.channel import Channel, ChannelInUse
from episodic.bridge.layout import HEADER, VERSION, Layout, Sizes
from episodic.interface.columns import step_widths
from episodic.interface.commands import Kind, StartCommand, TrajectoryCommand
from episodic.interface.vocabulary import Flag
from episodic.logs import read_episodes
from tests.helpers import ROOT, Served, channel_name, shared_runner, shm_leftovers, wave

pytestmark = pytest.mark.slow  # served runners and client processes
# a realtime runner paces its segments to the wall clock and the learner's timeouts are set against
# them: those tests run alone on the machine
realtime = pytest.mark.serial

HOME = np.array([0, 0.5876, 0, 1.36, 0, -0.321, -1.57])


@pytest.fixture(autouse=True)
def no_leftovers():
    before = shm_leftovers()
    yield
    assert shm_leftovers() == before, "a test left shared-memory objects behind"


def learner_process(channel: str, code: str) -> subprocess.Popen:
    """A Python learner attached to ``channel`` as ``c``, running ``code``; it prints 'attached' first."""
    script = (f"import sys, numpy as np\nfrom episodic.bridge import Client\nfrom tests.helpers import wave\n"
              f"c = Client({channel!r}, timeout=10)\nprint('attached', flush=True)\n{code}")
    proc = subprocess.Popen([sys.executable, "-c", script], cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "attached", proc.stderr.read()
    return proc


@pytest.fixture(scope="module")
def served():
    """A blocking runner shared by the tests below that leave it serving."""
    with shared_runner() as runner:
        yield runner


def test_a_second_client_is_refused_naming_the_holder_and_a_dead_holders_hold_is_released(served):
    holder = learner_process(served.channel, "import time\ntime.sleep(60)")
    try:
        with pytest.raises(ChannelInUse, match=rf"channel '{served.channel}' is in use by another client "
                                               rf"\(pid {holder.pid}\)"):
            Client(served.channel)
    finally:
        holder.kill()
        holder.wait()
    with Client(served.channel, timeout=10) as client:  # the kernel dropped the dead holder's lock
        assert client.start_episode(max_commands=1).flag == Flag.OK
    with Client(served.channel, timeout=10) as client:  # and a closed client's
        assert client.reset().flag == Flag.ABORTED_BY_LEARNER


@realtime
def test_a_new_client_never_takes_a_dead_learners_reply(tmp_path):
    """The learner dies while its 1.5 s segment runs (real time); the next client's start is run and
    answered as its own, not with the dead learner's reply."""
    with Served(channel_name(), tmp_path / "rt.h5", "--mode", "realtime") as s:
        dead = learner_process(s.channel, (
            "r = c.start_episode(max_commands=1000, episode_id=1)\n"
            "c.timeout = 0.2\n"
            "try:\n    c.send_trajectory(wave(r.posture, n=750, amplitude=0.05))\n"
            "except TimeoutError:\n    import os; os.kill(os.getpid(), 9)\n"))
        assert dead.wait(30) == -signal.SIGKILL, dead.stderr.read()
        with Client(s.channel, timeout=20) as client:
            reply = client.send(StartCommand(2, 3))
            assert (reply.episode_id, reply.index, reply.flag) == (2, 0, Flag.OK), reply
            assert client.send(TrajectoryCommand(2, 1, 3, wave(reply.posture))).flag == Flag.OK
        assert s.stop() == 0
    episodes = {int(e.attrs["episode_id"]): e for e in read_episodes(tmp_path / "rt.h5")}
    assert sorted(episodes) == [1, 2] and list(episodes[1].segments["index"]) == [1]
    assert list(episodes[2].segments["index"]) == [1]


@realtime
def test_realtime_commands_sent_faster_than_segments_all_run_once(tmp_path):
    """Each 1 s segment times out after 0.2 s and the learner sends the next at once: a command
    written while the runner has not taken the previous one is not sent (the learner says so and
    sends it again); every command sent runs exactly once, in order."""
    with Served(channel_name(), tmp_path / "rt.h5", "--mode", "realtime") as s:
        with Client(s.channel, timeout=20) as client:
            start = client.send(StartCommand(5, 4))
            client.timeout = 0.2
            not_sent = 0
            for k in range(1, 5):
                while True:
                    try:
                        client.send(TrajectoryCommand(5, k, 4, wave(start.posture)))
                    except TimeoutError as exc:
                        if "this command was not sent" in str(exc):
                            not_sent += 1
                            continue
                        assert "did not answer" in str(exc)
                    break
            client.timeout = 20
            assert client.send(StartCommand(6, 1)).flag == Flag.OK  # answered after the four segments
        assert s.stop() == 0
    assert not_sent > 0
    episodes = {int(e.attrs["episode_id"]): e for e in read_episodes(tmp_path / "rt.h5")}
    segments = episodes[5].segments
    assert list(segments["index"]) == [1, 2, 3, 4] and list(segments["flag"]) == [Flag.OK] * 4


def test_a_reply_must_echo_the_command_it_answers(served):
    """A reply block whose seq matches but whose kind differs (a reply the runner wrote for another
    command) is refused, not accepted."""
    with Client(served.channel, timeout=10) as client:
        os.kill(served.proc.pid, signal.SIGSTOP)
        try:
            client.timeout = 0.3
            with pytest.raises(TimeoutError):
                client.send(StartCommand(8, 1))
            client._blocks.reply["kind"] = int(Kind.TRAJECTORY)  # what a confused answer would say
            client._blocks.reply["seq"] = client._seq
            client._blocks.reply["episode_id"], client._blocks.reply["index"] = 8, 0
            client._channel.reply_ready.release()
            with pytest.raises(ProtocolError, match="is for kind 1, index 0, episode 8; expected kind 0"):
                client._wait_reply(StartCommand(8, 1), time.monotonic() + 1)
        finally:
            os.kill(served.proc.pid, signal.SIGCONT)


@pytest.mark.parametrize("name", ["ab\ncd", "ab\n", "", "x" * 65, "a b", "a/b", "ä"])
def test_bad_channel_names_are_refused_by_the_client_and_serve(name):
    with pytest.raises(ValueError, match="use 1-64 letters, digits"):
        Client(name)
    out = subprocess.run([sys.executable, "-m", "episodic", "serve", "--channel", name], cwd=ROOT,
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 2 and "Invalid value for '--channel'" in out.stderr and "Traceback" not in out.stderr


@pytest.fixture(scope="module")
def corrupt_channel():
    """A channel this process creates (real memory object and semaphores) and its pristine header."""
    sizes = Sizes(7, 50, 20, 8, ("a", "b"), step_widths(7, 2), 500.0)
    chan = Channel.create(channel_name(), Layout(sizes))
    size = chan.layout.command_offset
    pristine = bytes(chan.mm[:size])
    yield chan, pristine
    chan.close()


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_a_corrupted_header_raises_protocol_error_with_a_reason(corrupt_channel, data):
    chan, pristine = corrupt_channel
    chan.mm[: len(pristine)] = pristine
    n = len(pristine)
    for _ in range(data.draw(st.integers(1, 4))):
        at = data.draw(st.integers(0, n - 1))
        chunk = data.draw(st.binary(min_size=1, max_size=min(16, n - at)))
        chan.mm[at : at + len(chunk)] = chunk
    chan.mm[:8], chan.mm[8:12] = b"EPISODIC", VERSION.to_bytes(4, "little")  # get past the first checks
    if data.draw(st.booleans()):
        chan.mm[8:12] = data.draw(st.integers(0, 2**32 - 1)).to_bytes(4, "little")
    try:
        Client(chan.name, timeout=1).close()
    except ProtocolError as exc:
        assert str(exc).strip() and str(exc) != f"channel '{chan.name}': "
    chan.mm[: HEADER.itemsize] = pristine[: HEADER.itemsize]


def test_every_single_corrupted_header_byte_is_refused_or_harmless(corrupt_channel):
    """Each byte of the header and its tables set to each of a few values: the client refuses the
    channel with a ProtocolError, or attaches and reads the (empty) log block by its column names
    (a corrupted log-column name was a KeyError at get_episode)."""
    chan, pristine = corrupt_channel
    refused = 0
    try:
        for at in range(len(pristine)):
            for value in {0, 1, 0x7F, 0xFF, pristine[at] ^ 1} - {pristine[at]}:
                chan.mm[: len(pristine)] = pristine
                chan.mm[at] = value
                try:
                    client = Client(chan.name, timeout=1)
                except ProtocolError as exc:
                    assert str(exc).startswith(f"channel '{chan.name}': ") and len(str(exc)) > 40
                    refused += 1
                    continue
                try:
                    log = client.get_episode()
                    assert {"time", "q", "task_state", *client.state_names} <= set(log)
                    assert set(client.get_episode(copy=False)) == set(log)
                finally:
                    client.close()
    finally:
        chan.mm[: len(pristine)] = pristine
    assert refused > 100
