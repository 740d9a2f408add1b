"""Batches over the bridge, against a real `episodic serve`: ``Client.evaluate`` gives results
(and fetched per-step logs) bit-identical to in-process batch evaluation, splits a population
larger than the runner's batch sizes, and a malformed or refused batch gets a reply with a
reason while the runner keeps serving."""
from __future__ import annotations

import os
import time

import numpy as np
import pytest

from episodic.bridge import BatchError, Client
from episodic.bridge.batches import decode_results, encode_batch, split
from episodic.bridge.client import _Request
from episodic.bridge.codec import encode_request
from episodic.interface.commands import GainsCommand, ResetCommand, StartCommand, TrajectoryCommand
from episodic.interface.vocabulary import Flag, Kind
from episodic.logs import read_episodes
from episodic.tools.batch import evaluate
from episodic.tools.replay import replay
from tests.helpers import Served, channel_name, shm_leftovers, wave
from tests.test_bridge import ENDINGS, Seen, assert_endings, reachable_target

pytestmark = pytest.mark.slow  # real `episodic serve` processes

HOME = np.array([0, 0.5876, 0, 1.36, 0, -0.321, -1.57])
CONTEXT = np.array([0.5, 0.2, 1.5])


@pytest.fixture(autouse=True)
def no_leftovers():
    before = shm_leftovers()
    yield
    assert shm_leftovers() == before, "a test left shared-memory objects behind"


def population(n: int = 6) -> list[list]:
    """Reach episodes of every shape: two segments at several rates, a gain set with ki, qd and
    task state, a refused context and a refused (discontinuous) segment."""
    out = []
    for k in range(n):
        episode = [StartCommand(100 + k, 2, context=CONTEXT + 0.01 * k)]
        if k % 3 == 1:
            episode += [GainsCommand(100 + k, 1, 2, np.full(7, 150.0), np.full(7, 6.0), ki=np.full(7, 0.5),
                                     wait_time=0.02),
                        TrajectoryCommand(100 + k, 2, 2, wave(HOME, phase=0.02 * k), qd=np.zeros((500, 7)))]
        else:
            episode += [TrajectoryCommand(100 + k, j, 2, wave(HOME, phase=0.02 * k), rate=250.0 * j, wait_time=0.01)
                        for j in (1, 2)]
        out.append(episode)
    out[-1][0] = StartCommand(100 + n - 1, 2, context=np.array([0.5, 0.2]))  # reach takes 0 or 3 values
    return out


def assert_same_results(got, expected, steps: bool = False) -> None:
    assert len(got) == len(expected)
    for a, b in zip(got, expected):
        assert (a.episode_return, a.flag, a.flags, a.success, a.n_steps, a.message) == \
            (b.episode_return, b.flag, b.flags, b.success, b.n_steps, b.message)
        np.testing.assert_array_equal(a.rewards, b.rewards)
        np.testing.assert_array_equal(a.task_states, b.task_states)
        np.testing.assert_array_equal(a.command_steps, b.command_steps)
        if steps and b.steps is None:  # never started: no log in-process, an empty one fetched
            assert len(a.steps["time"]) == 0
        elif steps:
            assert set(b.steps) <= set(a.steps)
            for name, values in b.steps.items():
                np.testing.assert_array_equal(a.steps[name], values, err_msg=name)


def test_a_population_over_the_bridge_is_bit_identical_to_in_process(tmp_path):
    episodes = population() + [[StartCommand(200, 1, posture=HOME + 9.0)]]  # refused: never starts
    expected = evaluate(episodes, "reach", seed=3, keep_steps=True)
    assert {r.flag for r in expected} == {Flag.OK, Flag.INVALID_PAYLOAD}
    with Served(channel_name(), tmp_path / "served.h5", "--threads", "2", "--seed", "3") as served:
        with Client(served.channel, timeout=20) as client:
            # a one-by-one episode of the runner's own first: batches do not depend on it
            client.start_episode(1, context=CONTEXT)
            client.send_trajectory(wave(HOME))
            got = client.evaluate(episodes, keep_steps=True)
            again = client.evaluate(episodes[::-1])
            after = [client.start_episode(1, context=CONTEXT), client.send_trajectory(wave(HOME))]
    assert_same_results(got, expected, steps=True)
    assert_same_results(again, expected[::-1])
    assert [r.flag for r in after] == [Flag.OK, Flag.OK]
    # the runner's log: its own episodes and both batches (the never-started episode is not one)
    logged = read_episodes(tmp_path / "served.h5")
    started = len(episodes) - 1
    assert [(e.attrs["batch"], e.attrs["batch_position"]) for e in logged] == \
        [(-1, -1)] + [(0, k) for k in range(started)] + [(1, k) for k in range(1, started + 1)] + [(-1, -1)]
    for e, r in zip(logged[1 : 1 + started], expected):
        assert e.attrs["return"] == r.episode_return
    assert replay(tmp_path / "served.h5").identical


def test_a_batch_result_says_how_each_episode_ended_and_the_logs_return(tmp_path):
    """tests/test_bridge.py's ENDINGS as one batch, each segment from the task's start posture:
    each result's flag and success are those its episode's ending reply gives, its return the
    runner's log's, bit for bit, the early end's charge (in the last command's reward) included."""
    target = reachable_target()
    episodes = []
    for k, ending in enumerate(ENDINGS):
        start = StartCommand(300 + k, 1, context=target if ending.at_target else CONTEXT)
        if ending.motion == "reset":
            episodes.append([start, ResetCommand(300 + k, max_commands=1)])
            continue
        q = np.repeat(HOME[None], ending.samples, axis=0)
        if ending.motion == "jump":
            q[10:, 0] += 1.5
        episodes.append([start, TrajectoryCommand(300 + k, 1, 1, q)])
    with Served(channel_name(), tmp_path / "served.h5") as served:
        with Client(served.channel, timeout=20) as client:
            results = client.evaluate(episodes)
        assert served.stop() == 0
    assert [r.flag for r in results] == [r.flags[-1] for r in results]  # the flag of the command that ended it
    seen = [[Seen(flag, i == len(r.flags) - 1, r.success and i == len(r.flags) - 1, reward, total, steps)
             for i, (flag, reward, total, steps) in enumerate(zip(r.flags, r.rewards, np.cumsum(r.rewards),
                                                                 r.command_steps))] for r in results]
    assert_endings(seen, read_episodes(tmp_path / "served.h5"))


def test_a_population_larger_than_a_batch_is_split_and_still_identical():
    episodes = population(5)
    expected = evaluate(episodes, "reach")
    with Served(channel_name(), None, "--max-batch", "2", "--max-batch-commands", "5") as served:
        with Client(served.channel, timeout=20) as client:
            assert [len(b) for b in split(client.sizes, episodes)] == [1, 1, 1, 1, 1]  # 3 commands each
            assert_same_results(client.evaluate(episodes), expected)
            long = [StartCommand(1, 5)] + [TrajectoryCommand(1, k, 5, wave(HOME)) for k in range(1, 6)]
            with pytest.raises(ValueError, match="episode 1 of the batch has 6 commands"):
                client.evaluate([episodes[0], long])


def raw_batch(client: Client, episodes, edit) -> object:
    """Send ``episodes`` as one batch after ``edit(blocks)`` changed the batch block; the reply."""
    def write(seq: int) -> None:
        encode_batch(client._blocks, episodes, False)
        edit(client._blocks)
        encode_request(client._blocks, Kind.BATCH, len(episodes), seq, os.getpid())
    return client._exchange(_Request(Kind.BATCH, len(episodes)), write, time.monotonic() + 20)


def test_a_malformed_batch_is_refused_with_a_reason_and_the_runner_serves_on():
    episodes = population(3)
    with Served(channel_name(), None) as served:
        with Client(served.channel, timeout=20) as client:
            def set_field(name, value):
                return lambda blocks: blocks.batch.__setitem__(name, value)

            def shuffle(blocks):
                blocks.batch_tables["commands"]["episode"][:3] = [1, 0, 0]

            def overrun(blocks):
                blocks.batch_tables["commands"]["values"][2] = 10**12  # a trajectory's arrays past the pool

            for edit, reason in ((set_field("n_episodes", 0), "n_episodes 0"),
                                 (set_field("n_episodes", 10**6), "n_episodes"),
                                 (set_field("n_commands", 10**9), "n_commands"),
                                 (set_field("n_values", 2**62), "n_values"), (shuffle, "episode column")):
                reply = raw_batch(client, episodes, edit)
                assert reply.flag == Flag.INVALID_PAYLOAD and reason in reply.message, (reason, reply.message)
            reply = raw_batch(client, episodes, overrun)
            assert reply.flag == Flag.OK  # that command is refused inside its episode
            results = decode_results(client._blocks, 3)
            assert results[0].flags[-1] == Flag.INVALID_PAYLOAD and "run past" in results[0].message
            assert_same_results(results[1:], evaluate(episodes[1:], "reach"))
            with pytest.raises(BatchError, match="not kept"):
                client._batch_log(0)
            assert client.start_episode(1, context=CONTEXT).flag == Flag.OK


def test_a_realtime_runner_refuses_batches():
    with Served(channel_name(), None, "--mode", "realtime") as served:
        with Client(served.channel, timeout=20) as client:
            with pytest.raises(BatchError, match="realtime"):
                client.evaluate(population(1))


def test_the_cma_example_runs_a_generation_as_one_batch(capsys):
    pytest.importorskip("cma", reason="pip install 'episodic[learn]'")
    from examples.cma_ball_in_cup import main

    assert main(["--generations", "1", "--threads", "2"]) == 0  # it checks one by one == batch itself
    out = capsys.readouterr().out
    assert "population 12" in out and "no catch by the mean in 1 generations" in out
