"""An episode cut short never returns more than the same episode completed by holding still, which
never returns more than the task's reference: for every task, in-process and over the bridge.

Each task's three episodes plan the same motion time as its scripted reference (examples/): the
reference itself; "hold", the start posture held throughout; "crash", a swing of j1 that trips the
joint-velocity safety abort within its first 0.1 s. The runner charges the crash the steps it left
out at the task's worst reward rate (Task.worst_reward_rate), and a task whose reward is a cost
also charges an episode shorter than its horizon (Task.scored_duration)."""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from episodic.batch import evaluate
from episodic.bridge import Client
from episodic.commands import GainsCommand, StartCommand, TrajectoryCommand
from episodic.kinematics import SiteIK
from episodic.log import read_episodes
from episodic.protocol import Flag
from episodic.robot import load_robot
from episodic.runner import Runner
from episodic.scene import build_scene
from episodic.tasks import TASKS, make_task
from episodic.trajectory import min_jerk
from examples import (ball_bouncing_reference, ball_in_cup_reference, ball_on_beam_reference, ball_paddling_reference,
                      beer_pong_reference, casting_reference, pole_balancing_reference, tetherball_reference)
from tests.helpers import Served, channel_name

WAM = load_robot("wam")
CRASH_ACCELERATION = 400.0  # rad/s^2 of j1's desired swing: its velocity limit (2.39 rad/s) within ~10 ms
CRASH_SWING = 0.5           # rad, where j1's desired swing stops


def reach_reference(robot=WAM, episode_id: int = 1) -> list:
    """Inverse kinematics to the default target, a 1 s minimum-jerk move and 0.2 s held: the
    task's horizon (examples/reach_learner.py does the same with its own durations)."""
    task = make_task("reach")
    scene = build_scene(robot, task)
    ik = SiteIK(scene.model, robot.end_effector_site, scene.qpos_adr, scene.dof_adr, robot.range_lower,
                robot.range_upper)
    home = task.start_posture(robot)
    goal, _ = ik.solve(home, task.default_context())
    move = min_jerk(home, goal, 1.0, robot.control_dt)
    return [StartCommand(episode_id, 1), TrajectoryCommand(episode_id, 1, 1, move.q, move.qd, move.qdd, wait_time=0.2)]


REFERENCES = {
    "reach": reach_reference,
    "ball_in_cup": lambda: ball_in_cup_reference.reference_commands(WAM, 1),
    "ball_on_beam": lambda: ball_on_beam_reference.reference_commands(WAM, 1),
    "ball_paddling": lambda: ball_paddling_reference.reference_commands(WAM, 1),
    "ball_bouncing": lambda: ball_bouncing_reference.reference_commands(WAM, 1),
    "beer_pong": lambda: beer_pong_reference.reference_commands(WAM, 1),
    "casting": lambda: casting_reference.reference_commands(WAM, 1),
    "pole_balancing": lambda: pole_balancing_reference.reference_commands(WAM, 1),
    "tetherball": lambda: tetherball_reference.reference_commands(WAM, 1),
}


def planned_time(commands: list, robot=WAM) -> float:
    """s of motion the segments and gain sets after the start plan (samples and waits)."""
    total = 0.0
    for cmd in commands[1:]:
        if isinstance(cmd, TrajectoryCommand):
            total += len(cmd.q) / (cmd.rate or robot.control_rate)
        total += cmd.wait_time if isinstance(cmd, (TrajectoryCommand, GainsCommand)) else 0.0
    return total


def three_episodes(name: str, robot=WAM) -> dict[str, list]:
    """The task's crash, hold and reference episodes (module docstring), ids 1, 2, 3."""
    reference = REFERENCES[name]()
    start = reference[0]
    posture = make_task(name).start_posture(robot) if start.posture is None else np.asarray(start.posture)
    n = int(round(planned_time(reference, robot) * robot.control_rate))
    t = np.arange(1, n + 1) * robot.control_dt
    hold = np.tile(posture, (n, 1))
    crash = hold.copy()
    crash[:, 0] += np.minimum(0.5 * CRASH_ACCELERATION * t**2, CRASH_SWING)

    def episode(episode_id: int, q: np.ndarray) -> list:
        first = StartCommand(episode_id, 1, context=start.context, posture=start.posture)
        return [first, TrajectoryCommand(episode_id, 1, 1, q)]

    renumbered = [dataclasses.replace(cmd, episode_id=3) for cmd in reference]
    return {"crash": episode(1, crash), "hold": episode(2, hold), "reference": renumbered}


def check_order(name: str, returns: dict[str, float], flags: dict[str, Flag], crash_steps: int) -> None:
    assert flags["crash"] == Flag.SAFETY_ABORT, f"{name}: the crash was not aborted ({flags['crash'].name})"
    assert crash_steps * WAM.control_dt < 0.1, f"{name}: the crash ran {crash_steps} steps"
    assert flags["hold"] == Flag.OK and flags["reference"] == Flag.OK
    assert returns["crash"] <= returns["hold"] <= returns["reference"], f"{name}: {returns}"


def test_every_task_has_a_reference_here():
    assert set(REFERENCES) == set(TASKS)


@pytest.mark.parametrize("name", sorted(REFERENCES))
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


@pytest.mark.slow  # a real `episodic serve` process per task
@pytest.mark.parametrize("name", sorted(REFERENCES))
def test_the_same_returns_over_the_bridge(name, tmp_path):
    episodes = three_episodes(name)
    local = dict(zip(episodes, evaluate(list(episodes.values()), name)))
    with Served(channel_name(), tmp_path / "bridge.h5", task=name) as served:
        with Client(served.channel, timeout=60) as client:
            remote = {}
            for key, commands in episodes.items():
                replies = [client.send(c) for c in commands]
                remote[key] = replies
        assert served.stop() == 0
    returns = {k: float(sum(r.reward for r in replies)) for k, replies in remote.items()}
    flags = {k: replies[-1].flag for k, replies in remote.items()}
    check_order(name, returns, flags, remote["crash"][-1].n_steps)
    for key, replies in remote.items():
        assert returns[key] == local[key].episode_return, (name, key)
        assert replies[-1].episode_done
