"""Batch evaluation in-process (episodic.batch): the results of a batch, on any number of
threads and in any order, are bit-identical to running each episode alone in a fresh Runner."""
from __future__ import annotations

import numpy as np
import pytest

from episodic.batch import EpisodeResult, evaluate
from episodic.commands import GainsCommand, StartCommand, TrajectoryCommand
from episodic.demo import demo_swings, swing_commands
from episodic.protocol import Flag
from episodic.robot import load_robot
from episodic.runner import Runner
from episodic.tasks import make_task
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
    """Six ball_in_cup swings (the reference and five perturbed), a short catch wait."""
    return [swing_commands(ROBOT, swing, episode_id=k + 1, wait=0.3) for k, (_, swing) in enumerate(demo_swings(6))]


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
