"""An episode cut short never returns more than the same episode completed by holding still, which
never returns more than the task's reference: for every task of the registry that declares a
scripted reference (Task.reference; the others are skipped, saying so), in-process (the three
episodes: examples/early_end.py; tests/test_tasks_over_bridge.py runs them over the bridge too)."""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from episodic.interface.commands import ResetCommand, StartCommand, TrajectoryCommand
from episodic.interface.vocabulary import Flag
from episodic.logs import read_episodes
from episodic.runtime.runner import Runner
from episodic.tasks import make_task
from episodic.tools.batch import evaluate
from examples.early_end import WAM, three_episodes
from tests.helpers import reference_cases


def check_order(name: str, returns: dict[str, float], flags: dict[str, Flag], crash_steps: int) -> None:
    assert flags["crash"] == Flag.SAFETY_ABORT, f"{name}: the crash was not aborted ({flags['crash'].name})"
    assert crash_steps * WAM.control_dt < 0.1, f"{name}: the crash ran {crash_steps} steps"
    assert flags["hold"] == Flag.OK and flags["reference"] == Flag.OK
    assert returns["crash"] <= returns["hold"] <= returns["reference"], f"{name}: {returns}"


@pytest.mark.parametrize("name", reference_cases())
def test_crashing_never_beats_holding_still_or_the_reference(name):
    episodes = three_episodes(name)
    results = dict(zip(episodes, evaluate(list(episodes.values()), name, threads=2)))
    returns = {k: r.episode_return for k, r in results.items()}
    check_order(name, returns, {k: r.flag for k, r in results.items()}, int(results["crash"].command_steps[-1]))
    assert results["reference"].success


def test_the_charge_is_in_the_reply_that_ends_the_episode_and_in_the_log(tmp_path):
    """A reach crash: the ending reply's reward is the segment's reward plus the charge for the
    steps it left out at the worst rate; the reply's episode return, the log's return and a
    batch's return agree."""
    crash = three_episodes("reach")["crash"]
    with Runner(make_task("reach"), log=tmp_path / "run.h5") as runner:
        start = runner.send(crash[0])
        reply = runner.send(crash[1])
        rate = runner.task.worst_reward_rate(runner.sim.model, runner.robot)
        segment = runner.machine.last_episode.segments[-1]
    assert reply.flag == Flag.SAFETY_ABORT and reply.episode_done and not reply.success
    left = len(crash[1].q) - reply.n_steps
    assert rate < 0
    assert reply.reward == pytest.approx(segment["reward"] + rate * left * WAM.control_dt, rel=1e-12)
    assert reply.episode_return == pytest.approx(start.reward + reply.reward, rel=1e-12)
    (stored,) = read_episodes(tmp_path / "run.h5")
    assert stored.attrs["return"] == reply.episode_return
    assert stored.attrs["early_end"] == pytest.approx(rate * left * WAM.control_dt, rel=1e-12)
    (batched,) = evaluate([crash], "reach")
    assert batched.episode_return == reply.episode_return


def test_an_episode_shorter_than_the_horizon_is_charged_the_rest():
    """reach scores 1.2 s of motion: a completed 0.2 s hold is charged the other 1 s at the worst
    rate, a learner's reset after it too; a 2 s hold is not charged."""
    hold = three_episodes("reach")["hold"]
    q = hold[1].q
    with Runner(make_task("reach")) as runner:
        rate = runner.task.worst_reward_rate(runner.sim.model, runner.robot)
        runner.send(StartCommand(1, 1))
        short = runner.send(TrajectoryCommand(1, 1, 1, q[:100]))
        segment = runner.machine.last_episode.segments[-1]["reward"]
        runner.send(StartCommand(2, 1))
        long = runner.send(TrajectoryCommand(2, 1, 1, np.tile(q[0], (1000, 1))))
        long_segment = runner.machine.last_episode.segments[-1]["reward"]
        runner.send(StartCommand(3, 2))
        runner.send(TrajectoryCommand(3, 1, 2, q[:100]))
        reset = runner.reset()
    assert short.flag == Flag.OK and short.episode_done
    assert short.reward == pytest.approx(segment + rate * 1.0, rel=1e-9)
    assert long.flag == Flag.OK and long.reward == long_segment
    assert long.episode_return > short.episode_return
    assert reset.flag == Flag.ABORTED_BY_LEARNER and reset.reward == pytest.approx(rate * 1.0, rel=1e-9)


def test_an_episode_ended_without_a_reply_is_reported_once_by_the_next_refusal():
    """A timeout ends an episode while the learner is silent: the refusal of its next command
    carries the charge and the episode's return (so the rewards of its replies add up to the log's
    return), a second refusal neither."""
    q = np.tile(WAM.home, (100, 1))
    with Runner(make_task("reach")) as runner:
        start = runner.send(StartCommand(1, 2))
        first = runner.send(TrajectoryCommand(1, 1, 2, q))
        runner.machine.abort(Flag.TIMEOUT, "the learner was silent")
        refused = runner.send(TrajectoryCommand(1, 2, 2, q))
        again = runner.send(TrajectoryCommand(1, 2, 2, q))
        ep = runner.machine.last_episode
    assert refused.flag == again.flag == Flag.TIMEOUT and refused.episode_done
    assert ep.early_end < 0 and refused.reward == ep.early_end
    assert refused.episode_return == ep.episode_return == start.reward + first.reward + refused.reward
    assert again.reward == 0.0 and again.episode_return == 0.0


@pytest.mark.parametrize("name", reference_cases())
def test_an_episode_that_never_moves_returns_no_more_than_holding_still(name):
    """A first segment refused (it starts 0.5 rad away from the held posture: DISCONTINUOUS) and
    a reset right after the start end the episode before any motion step: the task's up-front
    charge (Task.unplayed_return) and the horizon keep them at or below holding still."""
    episodes = three_episodes(name)
    hold = episodes["hold"]
    far = hold[1].q.copy()
    far[:, 0] += 0.5
    refused = [dataclasses.replace(hold[0], episode_id=4), dataclasses.replace(hold[1], episode_id=4, q=far)]
    reset = [dataclasses.replace(hold[0], episode_id=5, max_commands=1), ResetCommand(5)]
    held, jumped, aborted = evaluate([hold, refused, reset], name, threads=2)
    assert jumped.flag == Flag.DISCONTINUOUS and aborted.flag == Flag.ABORTED_BY_LEARNER
    assert jumped.episode_return <= held.episode_return and aborted.episode_return <= held.episode_return, \
        (jumped.episode_return, aborted.episode_return, held.episode_return)
