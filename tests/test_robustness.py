"""Well-formed but extreme commands never end the runner: each gets a reply with a flag and a
message, the robot holds and the next episode runs (in-process and over a live channel)."""
from __future__ import annotations

import itertools
import os

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from episodic.bridge.layout import MAGIC, VERSION
from episodic.interface.commands import Feedforward, GainsCommand, ResetCommand, StartCommand, TrajectoryCommand
from episodic.interface.vocabulary import Flag
from episodic.runtime.runner import Runner
from episodic.tasks import make_task
from tests.helpers import Served, channel_name, raw_channel, raw_exchange, wave

HOME = np.array([0, 0.5876, 0, 1.36, 0, -0.321, -1.57])
N = HOME.size
FUZZ_EXAMPLES = int(os.environ.get("EPISODIC_FUZZ_EXAMPLES", "100"))  # raise for a long fuzz run
EXTREME = [0.0, -0.0, 1.0, -1.0, 1e-300, 5e-324, 1e6, -1e6, 1e6 + 1, 1e300, -1e300, 1.7e308]


def still_serves(runner: Runner) -> None:
    """A normal episode runs OK after whatever came before."""
    runner.send(StartCommand(999, max_commands=1, context=np.array([0.6, 0.1, 1.5])))
    reply = runner.send(TrajectoryCommand(999, 1, 1, wave(runner.machine._hold_q)))
    assert reply.flag == Flag.OK, reply.message


@pytest.fixture(scope="module")
def shared_runner():
    with Runner(make_task("reach")) as r:
        yield r


@pytest.mark.parametrize("mode", list(Feedforward))
def test_gains_without_wait_run_no_steps(shared_runner, mode):
    """The fuzzer's most common kill: a gain set with wait_time 0 in feedforward mode."""
    r = shared_runner
    r.send(StartCommand(1, max_commands=2))
    reply = r.send(GainsCommand(1, 1, 2, r.robot.kp, r.robot.kd, feedforward=mode))
    assert (reply.flag, reply.n_steps, reply.episode_done) == (Flag.OK, 0, False)
    reply = r.send(TrajectoryCommand(1, 2, 2, wave(HOME)))
    assert reply.flag == Flag.OK and reply.episode_done


@pytest.mark.parametrize("field, value, words", [
    ("rate", 1e306, "rate"), ("rate", 5e-324, "lasts"), ("q", 1e300, "magnitude"),
    ("qd", 1e300, "magnitude"), ("qdd", -1e300, "magnitude"),
])
def test_huge_rates_and_samples_are_refused(shared_runner, field, value, words):
    r = shared_runner
    r.send(StartCommand(2, max_commands=1))
    q = np.tile(HOME, (5, 1))
    fields = dict(q=q, qd=np.zeros_like(q), qdd=np.zeros_like(q), rate=100.0)
    fields[field] = value if field == "rate" else np.full_like(q, value)
    reply = r.send(TrajectoryCommand(2, 1, 1, **fields))
    assert reply.flag == Flag.INVALID_PAYLOAD and words in reply.message
    still_serves(r)


def test_gains_that_make_the_physics_unstable_abort_and_hold(shared_runner):
    r = shared_runner
    r.send(StartCommand(3, max_commands=1))
    big = np.full(N, 1e6)
    reply = r.send(GainsCommand(3, 1, 1, big, np.zeros(N), feedforward=Feedforward.NONE, wait_time=1.0))
    assert reply.flag in (Flag.SAFETY_ABORT, Flag.OK) and reply.episode_done
    assert np.all(np.isfinite(r.sim.q)) and np.all(np.abs(r.sim.q - HOME) < 0.5)
    still_serves(r)


def test_a_failing_task_gives_internal_error_and_the_next_episode_runs(monkeypatch, tmp_path):
    with Runner(make_task("reach"), log=tmp_path / "run.h5") as r:
        r.send(StartCommand(4, max_commands=1))
        monkeypatch.setattr(r.task, "step_reward", lambda *a: 1 / 0)
        reply = r.send(TrajectoryCommand(4, 1, 1, wave(HOME)))
        assert reply.flag == Flag.INTERNAL_ERROR and "ZeroDivisionError" in reply.message
        assert reply.episode_done and r.machine.episode is None
        monkeypatch.undo()
        still_serves(r)


finite = st.sampled_from(EXTREME) | st.floats(allow_nan=False, allow_infinity=False)


def mostly(value: int, low: int, high: int):
    """``value`` three times in four, else any integer in [low, high]."""
    return st.sampled_from([value] * 3 + [None]).flatmap(
        lambda v: st.just(v) if v is not None else st.integers(low, high))


@st.composite
def commands(draw, episode_id: int, index: int):
    """A structured command of any kind for ``episode_id``, mostly the expected ``index`` of 3,
    with extreme finite values."""
    kind = draw(st.sampled_from(["trajectory", "trajectory", "gains", "gains", "reset", "start"]))
    index, max_commands = draw(mostly(index, 0, 4)), draw(mostly(3, 1, 4))
    if kind == "reset":
        return ResetCommand(episode_id)
    if kind == "start":
        return StartCommand(episode_id, max_commands, context=np.array(draw(st.lists(finite, max_size=3))))
    if kind == "gains":
        gains = [np.full(N, draw(finite)) for _ in range(3)]
        task_gains = draw(st.none() | st.lists(finite, max_size=3).map(np.array))
        return GainsCommand(episode_id, index, max_commands, *gains,
                            feedforward=draw(st.sampled_from(list(Feedforward))),
                            wait_time=draw(st.sampled_from([0.0, 0.002, 0.5])), task_gains=task_gains)
    n = draw(st.sampled_from([1, 2, 3, 50]))
    q = HOME + draw(st.sampled_from([0.0, 1e-3, 0.05])) * np.arange(n)[:, None] / max(n - 1, 1)
    if draw(st.booleans()):
        q[draw(st.integers(0, n - 1)), draw(st.integers(0, N - 1))] = draw(finite)
    qd = draw(st.none() | st.just(np.zeros_like(q)) | finite.map(lambda v: np.full_like(q, v)))
    qdd = None if qd is None else draw(st.none() | finite.map(lambda v: np.full_like(q, v)))
    return TrajectoryCommand(episode_id, index, max_commands, q, qd, qdd,
                             rate=draw(st.none() | finite), wait_time=draw(st.sampled_from([0.0, 0.01])))


@settings(max_examples=FUZZ_EXAMPLES, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                 HealthCheck.function_scoped_fixture])
@given(data=st.data())
@pytest.mark.slow
def test_structured_commands_always_get_a_reply(shared_runner, data):
    r = shared_runner
    episode_id = next(_episode_ids)
    n = data.draw(st.integers(1, 4))
    for cmd in [StartCommand(episode_id, 3)] + [data.draw(commands(episode_id, k)) for k in range(1, n + 1)]:
        reply = r.send(cmd)
        assert isinstance(reply.flag, Flag) and (reply.flag == Flag.OK or reply.message)
        assert np.all(np.isfinite(r.sim.q))
    still_serves(r)


_episode_ids = itertools.count(10_000)


@pytest.fixture(scope="module")
def live(tmp_path_factory):
    with Served(channel_name(), tmp_path_factory.mktemp("fuzz") / "fuzz.h5") as served:
        with raw_channel(served.channel) as (chan, blocks):
            yield served, chan, blocks


def write_block(blocks, episode_id: int, kind: int, index: int, draw) -> None:
    """A block of ``kind`` that is valid but for at most two fields drawn for extreme values."""
    c = blocks.command
    c["magic"], c["version"], c["client_pid"] = MAGIC, VERSION, os.getpid()
    c["episode_id"], c["index"], c["kind"], c["max_commands"] = episode_id, index, kind, 3
    c["feedforward"] = draw(st.integers(0, 3))
    c["n_samples"] = draw(st.sampled_from([1, 2, 40]))
    c["n_context"] = 0
    for flag in ("has_posture", "has_qd", "has_qdd", "has_ki"):
        c[flag] = draw(st.integers(0, 1))
    c["rate"] = draw(st.sampled_from([0.0, 100.0, 2000.0]))
    c["wait_time"] = draw(st.sampled_from([0.0, 0.002, 0.1]))
    for name, view in blocks.command_arrays.items():
        view[...] = HOME if name == "posture" else 0.0
        if name in ("q", "qd", "qdd"):
            view[:40] = HOME if name == "q" else 0.0
    arrays = sorted(blocks.command_arrays)
    for _ in range(draw(st.integers(0, 2))):
        field = draw(st.sampled_from(["rate", "wait_time", "n_samples", "n_context", "feedforward",
                                      "max_commands", "array"]))
        if field == "array":
            view = blocks.command_arrays[draw(st.sampled_from(arrays))]
            view.flat[draw(st.integers(0, min(view.size, 280) - 1))] = draw(finite)
        elif field in ("rate", "wait_time"):
            c[field] = draw(finite)
        else:
            c[field] = draw(st.sampled_from([-1, 0, 4, 2**31 - 1, blocks.layout.sizes.max_samples]))


@pytest.mark.slow
@settings(max_examples=FUZZ_EXAMPLES, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_raw_blocks_in_a_live_channel_always_get_a_reply(live, data):
    served, chan, blocks = live
    episode_id = next(_episode_ids)
    write_block(blocks, episode_id, 0, 0, data.draw)
    raw_exchange(chan, blocks)
    for index in range(1, data.draw(st.integers(1, 3)) + 1):
        write_block(blocks, episode_id, data.draw(st.sampled_from([1, 1, 2, 2, 3, -1, 4])), index, data.draw)
        reply = raw_exchange(chan, blocks)
        assert int(reply["flag"]) in {f.value for f in Flag}
    assert served.proc.poll() is None, served.proc.stderr.read()
