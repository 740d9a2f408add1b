"""Batch evaluation (episodic.tools.batch): the results of a batch, on any number of threads, in any
order and through an executor, are bit-identical to running each episode alone in a fresh Runner;
a batch evaluated into a run's log is numbered there and replays bit-identically."""
from __future__ import annotations

import dataclasses
from concurrent.futures import Future, ThreadPoolExecutor

import h5py
import numpy as np
import pytest
from click.testing import CliRunner

from episodic.cli.main import main
from episodic.interface.commands import GainsCommand, StartCommand, TrajectoryCommand
from episodic.interface.robot import load_robot
from episodic.interface.vocabulary import EpisodeResult, Flag
from episodic.logs import read_episodes, read_metadata, read_summary
from episodic.runtime.runner import Runner
from episodic.task import place_target
from episodic.tasks import TASKS, make_task
from episodic.tasks.ball_in_cup_swing import demo_swings, swing_commands
from episodic.tools.batch import (
    BATCH_ABORT_MESSAGE,
    RUNNERS,
    Chunk,
    VersionMismatch,
    evaluate,
    evaluate_chunk,
    evaluate_into,
    setup_for,
)
from episodic.tools.replay import replay
from examples.ball_on_beam_reference import reference_commands as beam_commands
from tests.helpers import wave

ROBOT = load_robot("wam")


def one_by_one(episodes, name: str, params=None) -> list[dict]:
    """Each episode alone in a fresh Runner, its commands sent until one ends it."""
    out = []
    for commands in episodes:
        with Runner(make_task(name, params or {}), "wam", seed=0) as runner:
            replies = []
            for command in commands:
                replies.append(runner.send(command))
                if replies[-1].episode_done:
                    break
            ended_by_commands = runner.machine.episode is None
        ep = runner.episodes[-1]
        out.append({"replies": replies, "flag": Flag(ep.flag), "n_steps": ep.n_steps, "success": ep.success,
                    "steps": runner.get_episode(), "ended": ended_by_commands})
    return out


def assert_same(result: EpisodeResult, ref: dict) -> None:
    replies = ref["replies"]
    assert ref["ended"]  # the reference episodes run to their end (or are refused) by themselves
    assert result.rewards.tobytes() == np.array([r.reward for r in replies]).tobytes()
    assert result.episode_return == float(np.array([r.reward for r in replies]).sum())
    assert result.flags == tuple(r.flag for r in replies)
    assert result.task_states.tobytes() == np.array([r.state for r in replies], dtype=float).tobytes()
    assert result.command_steps.tolist() == [r.n_steps for r in replies]
    assert (result.flag, result.n_steps, result.success) == (ref["flag"], ref["n_steps"], ref["success"])
    if result.steps is not None:
        assert result.steps.keys() == ref["steps"].keys()
        for name, column in ref["steps"].items():
            assert result.steps[name].tobytes() == column.tobytes(), name


def assert_identical(a: EpisodeResult, b: EpisodeResult) -> None:
    """Two results bit for bit, field by field."""
    for field in dataclasses.fields(EpisodeResult):
        x, y = getattr(a, field.name), getattr(b, field.name)
        if isinstance(x, np.ndarray):
            assert x.dtype == y.dtype and x.shape == y.shape and x.tobytes() == y.tobytes(), field.name
        elif isinstance(x, dict):
            assert x.keys() == y.keys() and all(x[k].tobytes() == y[k].tobytes() for k in x), field.name
        else:
            assert x == y, field.name


def with_ids(episode: list, episode_id: int) -> list:
    """The same commands under another episode id."""
    out = []
    for c in episode:
        if isinstance(c, StartCommand):
            out.append(StartCommand(episode_id, c.max_commands, posture=c.posture, context=c.context))
        elif isinstance(c, TrajectoryCommand):
            out.append(TrajectoryCommand(episode_id, c.index, c.max_commands, c.q, c.qd, c.qdd, c.rate, c.wait_time))
        else:
            out.append(GainsCommand(episode_id, c.index, c.max_commands, c.kp, c.kd, c.ki, c.feedforward,
                                    c.wait_time, c.task_gains))
    return out


@pytest.fixture(scope="module")
def swings():
    """Six ball_in_cup swings (the reference and five perturbed), a short catch wait (0.5 s: the
    reference's ball comes to rest in the cup 0.3-0.5 s after the swing)."""
    return [swing_commands(ROBOT, swing, episode_id=k + 1, wait=0.5) for k, (_, swing) in enumerate(demo_swings(6))]


@pytest.fixture(scope="module")
def swings_alone(swings):
    return one_by_one(swings, "ball_in_cup")


def reach_episode(k: int) -> list:
    home = ROBOT.home
    context = np.array([0.3, 0.4, 1.4]) + 0.05 * k
    return [StartCommand(k + 1, 2, context=context),
            TrajectoryCommand(k + 1, 1, 2, wave(home, n=150, amplitude=0.1 + 0.03 * k)),
            TrajectoryCommand(k + 1, 2, 2, wave(home, n=100, amplitude=0.05 * k), wait_time=0.1)]


def refused_episode(k: int) -> list:
    """A reach episode whose first segment starts far from the start posture: refused."""
    home = ROBOT.home
    return [StartCommand(k + 1, 2, context=np.array([0.3, 0.4, 1.4])),
            TrajectoryCommand(k + 1, 1, 2, wave(home, n=150) + 0.5),
            TrajectoryCommand(k + 1, 2, 2, wave(home, n=100))]


@pytest.mark.slow
def test_ball_in_cup_batch_is_bit_identical_for_any_thread_count_and_order(swings, swings_alone):
    returns = [r["replies"][-1].reward for r in swings_alone]
    assert len(set(returns)) == len(swings)  # the swings differ, so order matters
    one = evaluate(swings, "ball_in_cup", threads=1, keep_steps=True)
    order = [3, 0, 5, 1, 4, 2]
    two = evaluate([with_ids(swings[i], 100 + j) for j, i in enumerate(order)], "ball_in_cup", threads=2,
                   keep_steps=True)
    for i, result in enumerate(one):
        assert_same(result, swings_alone[i])
    for j, i in enumerate(order):
        assert_same(two[j], swings_alone[i])
    assert any(r.success for r in one) and not all(r.success for r in one)


def test_reach_batch_with_a_refused_episode(swings):
    episodes = [reach_episode(k) for k in range(5)]
    episodes.insert(2, refused_episode(2))
    alone = one_by_one(episodes, "reach")
    assert alone[2]["flag"] == Flag.DISCONTINUOUS and alone[2]["replies"][-1].flag == Flag.DISCONTINUOUS
    for threads in (1, 2, 4):  # 6 episodes: more than the threads
        results = evaluate(episodes, ("reach", {}), threads=threads, keep_steps=threads == 2)
        assert len(results) == len(episodes)
        for result, ref in zip(results, alone):
            assert_same(result, ref)
        assert results[2].flag == Flag.DISCONTINUOUS and len(results[2].flags) == 2  # the third not sent
        assert all(r.flag == Flag.OK for k, r in enumerate(results) if k != 2)
    assert len({r.episode_return for r in results}) == len(episodes)


def test_feedback_law_task_ball_on_beam():
    episodes = [beam_commands(ROBOT, k + 1, context=[0.05 * (k - 1)], duration=0.6,
                              task_gains=[1.5 + 0.3 * k, 0.5]) for k in range(3)]
    alone = one_by_one(episodes, "ball_on_beam")
    results = evaluate(episodes[::-1], lambda: make_task("ball_on_beam", {}), threads=2, keep_steps=True)[::-1]
    for result, ref in zip(results, alone):
        assert_same(result, ref)
    assert len({r.episode_return for r in results}) == 3


def test_unfinished_episode_and_bad_arguments():
    short = reach_episode(1)[:2]  # max_commands 2, one segment sent
    result, = evaluate([short], "reach")
    assert result.flag == Flag.INTERRUPTED and result.flags == (Flag.OK, Flag.OK)
    with pytest.raises(TypeError):
        evaluate([short], make_task("reach"))
    with pytest.raises(ValueError):
        evaluate([short], "reach", threads=0)
    assert evaluate([], "reach", threads=2) == []


@pytest.mark.slow
def test_an_executor_gets_chunks_and_its_results_match(swings, swings_alone):
    with ThreadPoolExecutor(2) as pool:
        results = evaluate(swings, "ball_in_cup", executor=pool, chunk_size=4, keep_steps=True)
    for result, ref in zip(results, swings_alone):
        assert_same(result, ref)
    with pytest.raises(TypeError, match="with an executor"):
        evaluate(swings[:1], lambda: make_task("ball_in_cup"), executor=ThreadPoolExecutor(1))


class OtherVersions:
    """An executor whose workers report other MuJoCo and episodic versions than this process."""

    def submit(self, fn, *args) -> Future:
        future: Future = Future()
        done = fn(*args)
        future.set_result(dataclasses.replace(done, versions={**done.versions, "mujoco": "3.1.6",
                                                              "episodic": "0.0.1"}))
        return future


def test_results_from_other_versions_are_refused():
    with pytest.raises(VersionMismatch) as refused:
        evaluate([reach_episode(0)], "reach", executor=OtherVersions())
    message = str(refused.value)
    assert "mujoco 3.1.6 on the worker" in message and "episodic 0.0.1 on the worker" in message
    assert "numpy" not in message and "pip install" in message


@pytest.fixture
def random_targets(monkeypatch):
    """reach with its target moved by the episode's random generator (seeded with the run's seed
    and the episode's number in the run), so an episode replays right only from the right seed."""
    reach = TASKS["reach"]

    def initialize_episode(self, model, data, context, rng) -> None:
        place_target(data, self.episode.ids, context + rng.normal(0.0, 0.05, 3))

    monkeypatch.setattr(reach, "initialize_episode", initialize_episode)


def started_episode(runner: Runner, k: int) -> None:
    """Send reach_episode(k) on ``runner`` (k <= 5: it runs to its end)."""
    for command in reach_episode(k):
        runner.send(command)


def test_batches_in_a_run_log_are_numbered_and_replay_bit_identically(tmp_path, random_targets):
    path = tmp_path / "run.h5"
    batch0 = [reach_episode(k) for k in range(3)] + [refused_episode(3)]
    never = [TrajectoryCommand(9, 1, 1, wave(ROBOT.home, n=50))]  # no start: refused, never runs
    batch1 = [reach_episode(4), never, reach_episode(1)]
    with Runner(make_task("reach"), log=path, keep_episodes=True, seed=3) as runner:
        started_episode(runner, 0)
        first = evaluate_into(runner, batch0, threads=2)
        started_episode(runner, 1)
        runner.send(reach_episode(2)[0])  # left running: the batch aborts it
        second = evaluate_into(runner, batch1)
        started_episode(runner, 3)
        kept = list(runner.episodes)
    for result, alone in zip(first, evaluate(batch0, "reach", seed=3)):  # as evaluated without a log
        assert_identical(result, alone)
    assert [r.flag for r in second] == [Flag.OK, Flag.OUT_OF_ORDER, Flag.OK]
    rows, partial = read_summary(path)
    assert not partial and rows["number"].tolist() == list(range(10)) == [ep.number for ep in kept]
    assert rows["batch"].tolist() == [-1, 0, 0, 0, 0, -1, -1, 1, 1, -1]
    assert rows["batch_position"].tolist() == [-1, 0, 1, 2, 3, -1, -1, 0, 2, -1]
    assert rows["flag"][6] == Flag.ABORTED_BY_LEARNER and kept[6].message == BATCH_ABORT_MESSAGE
    assert [float(x) for x in rows["return"][1:5]] == [r.episode_return for r in first]
    assert rows["return"][7] == second[0].episode_return and rows["return"][8] == second[2].episode_return
    with h5py.File(path) as f:
        assert f["rejected"][()].tolist() == [[9, 1, int(Flag.OUT_OF_ORDER)]]
    stored = read_episodes(path, [2, 8])
    assert [tuple(ep.attrs["rng_seed"]) for ep in stored] == [(3, 0), (3, 0)]  # first of a fresh runner
    assert [(ep.attrs["batch"], ep.attrs["batch_position"]) for ep in stored] == [(0, 1), (1, 2)]
    whole = replay(path)
    assert whole.identical and len(whole.episodes) == 10, whole.differences
    alone = replay(path, [8, 2, 5])  # batch episodes without what ran before them, and the reverse
    assert alone.identical and len(alone.episodes) == 3, alone.differences
    table = CliRunner().invoke(main, ["info", str(path)], catch_exceptions=False).output.splitlines()
    assert "batch:pos" in table[14]
    assert [line.split()[7] for line in table[16:26]] == ["-", "0:0", "0:1", "0:2", "0:3", "-", "-", "1:0",
                                                          "1:2", "-"]


@pytest.mark.slow
def test_evaluate_writes_a_log_of_an_equivalent_runner(tmp_path, swings):
    path = tmp_path / "batch.h5"
    results = evaluate(swings[:3], ("ball_in_cup", {}), threads=2, seed=5, log=path)
    meta = read_metadata(path)
    with Runner(make_task("ball_in_cup"), seed=5) as equivalent:
        expected = equivalent.metadata()
    for key in ("task", "task_params", "robot", "robot_settings", "mode", "seed", "limits", "state_columns"):
        assert meta[key] == expected[key], key
    rows, _ = read_summary(path)
    assert rows["batch"].tolist() == [0, 0, 0] and rows["batch_position"].tolist() == [0, 1, 2]
    assert rows["return"].tolist() == [r.episode_return for r in results]
    assert replay(path).identical


def test_evaluate_into_refuses_a_realtime_runner():
    with Runner(make_task("reach"), mode="realtime") as runner:
        with pytest.raises(ValueError, match="blocking"):
            evaluate_into(runner, [reach_episode(0)])


def test_a_worker_keeps_its_runners_for_the_next_chunk():
    setup = setup_for("reach", "wam", seed=0)
    chunk = Chunk(setup, ((0, tuple(reach_episode(0))), (1, tuple(reach_episode(1)))), threads=2)
    first = evaluate_chunk(chunk)
    idle = len(RUNNERS)
    again = evaluate_chunk(chunk)
    assert len(RUNNERS) == idle >= 2  # the same runners, borrowed and given back
    for (_, a, _), (_, b, _) in zip(first.results, again.results):
        assert_identical(a, b)
