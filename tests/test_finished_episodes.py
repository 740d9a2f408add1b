"""The runner's API for finished episodes (episodic.runtime.runner.Runner): subscribers, an
episode run elsewhere appended to the run, refusals noted, read-only counters; with real MuJoCo
episodes and a real HDF5 log."""
from __future__ import annotations

import logging

import h5py
import numpy as np
import pytest

from episodic.interface.commands import StartCommand, TrajectoryCommand
from episodic.interface.vocabulary import Flag
from episodic.logs import read_episodes
from episodic.logs.episode import EpisodeBuffer
from episodic.runtime.runner import Runner
from episodic.tasks import make_task
from tests.helpers import run_episode, wave


def test_subscribers_get_each_finished_episode_in_order_until_they_unsubscribe(runner):
    first: list[EpisodeBuffer] = []
    second: list[int] = []
    stop = runner.subscribe(first.append)
    runner.subscribe(lambda ep: second.append(ep.number))
    run_episode(runner, 1, n_segments=1)
    run_episode(runner, 2, n_segments=1)
    assert first == runner.episodes and [ep.number for ep in first] == [0, 1] and second == [0, 1]
    stop()
    stop()  # a second call changes nothing
    run_episode(runner, 3, n_segments=1)
    assert len(first) == 2 and second == [0, 1, 2]
    assert runner.episodes_started == runner.episodes_finished == 3


def test_one_callback_subscribed_twice_is_two_subscriptions(runner):
    got: list[int] = []
    stop = runner.subscribe(got.append)
    runner.subscribe(got.append)
    run_episode(runner, 1, n_segments=1)
    stop()
    run_episode(runner, 2, n_segments=1)
    assert len(got) == 3


def test_a_failing_subscriber_is_logged_and_the_others_and_the_run_go_on(runner, caplog):
    got: list[int] = []

    def broken(ep):
        raise ValueError("a bug in a report")

    runner.subscribe(broken)
    runner.subscribe(lambda ep: got.append(ep.number))
    with caplog.at_level(logging.ERROR, logger="episodic.runtime.runner"):
        replies = run_episode(runner, 1, n_segments=1)
    assert [r.flag for r in replies] == [Flag.OK, Flag.OK] and got == [0]
    assert "a subscriber to finished episodes failed on episode 0" in caplog.text
    assert "a bug in a report" in caplog.text


def test_a_running_episode_is_started_not_finished(runner):
    runner.send(StartCommand(1, 2))
    assert runner.episodes_started == 1 and runner.episodes_finished == 0
    with pytest.raises(RuntimeError, match="end it \\(abort\\) before adding"):
        runner.append_episode(EpisodeBuffer(0, 9, np.zeros(1), (0, 0), ()))
    runner.abort(Flag.TIMEOUT, "silent")
    assert runner.episodes_finished == 1


def test_an_appended_episode_is_numbered_as_the_next_and_logged(tmp_path):
    path = tmp_path / "run.h5"
    with Runner(make_task("reach"), log=path, keep_episodes=True) as r:
        got: list[EpisodeBuffer] = []
        r.subscribe(got.append)
        run_episode(r, 1, n_segments=1)
        with Runner(make_task("reach")) as elsewhere:
            run_episode(elsewhere, 7, n_segments=1)
        (outside,) = elsewhere.episodes
        batch = r.begin_batch()
        added = r.append_episode(outside, batch=batch, batch_position=4)
        run_episode(r, 2, n_segments=1)
        assert (batch, r.begin_batch(), r.batches) == (0, 1, 2)
        assert [ep.number for ep in got] == [0, 1, 2] and got[1] is added
        assert (added.episode_id, added.batch, added.batch_position) == (7, 0, 4)
        assert outside.number == 0  # the episode handed over is left as it was
        assert r.episodes_started == r.episodes_finished == 3
    stored = read_episodes(path)
    assert [e.attrs["episode_id"] for e in stored] == [1, 7, 2]
    assert stored[1].attrs["batch"] == 0 and stored[1].attrs["batch_position"] == 4
    np.testing.assert_array_equal(stored[1].steps["q"], outside.column("q"))


def test_refusals_outside_an_episode_are_counted_and_logged(tmp_path):
    path = tmp_path / "run.h5"
    with Runner(make_task("reach"), log=path) as r:
        r.send(TrajectoryCommand(3, 1, 1, wave(r.robot.home, n=10)))  # no episode runs
        r.record_refusal(TrajectoryCommand(4, 2, 2, wave(r.robot.home, n=10)), Flag.STALE_EPISODE)
        r.record_refusal(object(), Flag.INVALID_PAYLOAD)  # whatever arrived: ids -1
        assert r.refusals == 3 and r.episodes_finished == 0
    with h5py.File(path) as f:
        assert f["rejected"][()].tolist() == [[3, 1, Flag.OUT_OF_ORDER], [4, 2, Flag.STALE_EPISODE],
                                              [-1, -1, Flag.INVALID_PAYLOAD]]


def test_a_replayed_episode_reaches_no_subscriber_and_no_counter(runner):
    run_episode(runner, 1, n_segments=1)
    (ep,) = runner.episodes
    got: list[EpisodeBuffer] = []
    runner.subscribe(got.append)
    produced = runner.replay_episode(0, ep.initial_state, ep.commands)
    assert len(produced) == 1 and got == [] and runner.episodes_finished == 1
    np.testing.assert_array_equal(produced[0].column("q"), ep.column("q"))


def test_starting_afresh_counts_anew(runner):
    run_episode(runner, 1, n_segments=1)
    runner.record_refusal(object(), Flag.INVALID_PAYLOAD)
    runner.begin_batch()
    runner.start_afresh()
    assert (runner.episodes_started, runner.episodes_finished, runner.refusals, runner.batches) == (0, 0, 0, 0)
    run_episode(runner, 2, n_segments=1)
    assert [ep.number for ep in runner.episodes] == [0, 0]
