"""pole_balancing with real MuJoCo: the free pole's period, the reference swing-up and balance,
balancing from near upright, and the task over the bridge from another process, bit-identical
to in-process and to its replay."""
from __future__ import annotations

import numpy as np
import pytest

from episodic.bridge import Client
from episodic.commands import GainsCommand, StartCommand
from episodic.log import read_episodes, read_metadata
from episodic.protocol import Flag
from episodic.replay import replay
from episodic.robot import load_robot
from episodic.runner import Runner
from examples.pole_balancing_reference import KD, KP, reference_commands, task_gains
from episodic.tasks import TaskError, make_task
from tests.bridge_helpers import Served, assert_same_steps, channel_name, shm_leftovers

G = 9.81


@pytest.fixture
def runner():
    """A fresh runner: a swing-up is sensitive to where the previous episode left the arm, so the
    tests that judge one start from the same state whatever runs before them."""
    with Runner(make_task("pole_balancing")) as r:
        yield r


def run_episode(runner, commands):
    runner.episodes.clear()
    replies = [runner.send(c) for c in commands]
    (episode,) = runner.episodes
    return replies, episode, episode.steps()


def upright_for_the_last(steps, seconds: float, limit: float = 0.2) -> bool:
    phi = steps["task_state"][steps["index"] >= 1, 0]
    return bool(np.all(np.abs(phi[-int(round(seconds * 500)):]) < limit))


@pytest.mark.parametrize("length", [0.3, 1.0])
def test_a_free_pole_swings_with_the_physical_pendulum_period(length):
    with Runner(make_task("pole_balancing", {"pole_length": length})) as r:
        robot, task = r.robot, r.task
        kp, kd = robot.kp * 4, robot.kd * 2
        kp[6], kd[6] = 100.0, 1.0  # hold the lever still
        _, episode, steps = run_episode(r, [StartCommand(1, 1, context=[np.pi - 0.1]),
                                            GainsCommand(1, 1, 1, kp, kd, wait_time=5.0)])
    motion = steps["index"] == 1
    t, phi = steps["time"][motion], steps["task_state"][motion, 0]
    swing = np.unwrap(phi) - np.pi
    up = np.flatnonzero((swing[:-1] < 0) & (swing[1:] >= 0))  # upward zero crossings, interpolated
    crossings = t[up] - swing[up] / (swing[up + 1] - swing[up]) * (t[up + 1] - t[up])
    period = np.mean(np.diff(crossings))
    m, l, rad = task.pole_mass, length, task.pole_radius
    inertia = m * (l**2 / 3 + rad**2 / 4)  # solid cylinder about an end diameter
    expected = 2 * np.pi * np.sqrt(inertia / (m * G * l / 2))
    assert task.period == pytest.approx(expected)
    assert len(crossings) >= 3
    assert period == pytest.approx(expected, rel=0.05)
    assert period == pytest.approx(expected, rel=0.01)  # measured: within 0.4 %
    assert np.max(np.abs(swing)) < 0.25  # a small swing, not a tumble


def test_the_reference_swings_the_pole_up_and_balances_it(runner):
    replies, episode, steps = run_episode(runner, reference_commands(runner.robot))
    assert [r.flag for r in replies] == [Flag.OK, Flag.OK] and replies[-1].episode_done
    phi = steps["task_state"][steps["index"] == 1, 0]
    assert abs(phi[0]) > 3.0  # it started hanging
    assert np.argmax(np.abs(phi) < 0.2) * runner.robot.control_dt < 2.5  # up within 2.5 s
    assert upright_for_the_last(steps, 5.0)  # balanced from 3 s on (measured: 1.8 s)
    assert episode.success
    assert -2.5 < episode.episode_return < -1.0  # measured -1.82


@pytest.mark.parametrize("context", [[np.pi - 0.2], [np.pi + 0.3, -1.0]])
def test_the_reference_also_swings_up_from_other_hanging_starts(runner, context):
    _, episode, steps = run_episode(runner, reference_commands(runner.robot, context=context))
    assert upright_for_the_last(steps, 4.0) and episode.success


@pytest.mark.parametrize("context", [[0.15, -0.3], [-0.25, 0.5]])
def test_the_balance_law_alone_holds_a_pole_started_near_upright(runner, context):
    # a first episode brings the arm to the start posture; the second then starts settled
    run_episode(runner, [StartCommand(1, 1), GainsCommand(1, 1, 1, KP, KD, wait_time=1.0)])
    commands = [StartCommand(2, 1, context=context),
                GainsCommand(2, 1, 1, KP, KD, wait_time=3.0, task_gains=task_gains()[:4])]
    replies, episode, steps = run_episode(runner, commands)
    phi = steps["task_state"][steps["index"] == 1, 0]
    assert phi[0] == pytest.approx(context[0], abs=1e-6)
    assert np.max(np.abs(phi)) < 0.6 and np.max(np.abs(phi[-500:])) < 0.01
    assert episode.success and episode.episode_return > -0.2


def test_without_feedback_a_pole_near_upright_falls(runner):
    replies, episode, steps = run_episode(runner, [StartCommand(1, 1, context=[0.05]),
                                                   GainsCommand(1, 1, 1, KP, KD, wait_time=2.0)])
    phi = steps["task_state"][steps["index"] == 1, 0]
    assert np.max(np.abs(phi)) > 2.5 and not episode.success
    # hanging costs 2 per second: the return is well below the balanced one
    assert episode.episode_return < -1.0


def test_the_step_reward_is_the_documented_formula(runner):
    _, episode, steps = run_episode(runner, reference_commands(runner.robot, duration=1.0))
    motion = steps["index"] == 1
    phi = steps["task_state"][motion, 0]
    power = np.sum(np.abs(steps["u"][motion] * steps["qd"][motion]), axis=1)
    expected = -((1 - np.cos(phi)) + runner.task.effort * power) * runner.robot.control_dt
    np.testing.assert_allclose(steps["reward"][motion], expected, rtol=1e-9, atol=1e-15)


def test_bad_contexts_gains_and_parameters_are_refused(runner):
    robot = runner.robot
    reply = runner.send(StartCommand(1, 1, context=[0.1, 0.0, 0.0]))
    assert reply.flag == Flag.INVALID_PAYLOAD and reply.episode_done
    runner.send(StartCommand(2, 1))
    reply = runner.send(GainsCommand(2, 1, 1, robot.kp, robot.kd, task_gains=[1.0, 2.0]))
    assert reply.flag == Flag.INVALID_PAYLOAD and "k_phi" in reply.message
    with pytest.raises(TaskError, match="pole_length"):
        make_task("pole_balancing", {"pole_length": "2.0"})
    assert make_task("pole_balancing", {"pole_length": "0.8"}).period == pytest.approx(
        2 * np.pi * np.sqrt((0.8**2 / 3 + 0.01**2 / 4) / (G * 0.4)))


def test_over_the_bridge_bit_identical_to_in_process_and_to_replay(tmp_path):
    before = shm_leftovers()
    commands = reference_commands(load_robot("wam"), episode_id=5, context=[np.pi - 0.2], pole_length=0.4)
    channel = channel_name()
    with Served(channel, tmp_path / "bridge.h5", "--seed", "2", "--param", "pole_length=0.4",
                task="pole_balancing") as served:
        with Client(channel, timeout=30) as client:
            replies = [client.send(c) for c in commands]
            fetched = client.get_episode()
        assert served.stop() == 0
    assert shm_leftovers() == before
    assert [r.flag for r in replies] == [Flag.OK, Flag.OK] and replies[-1].episode_done
    meta = read_metadata(tmp_path / "bridge.h5")
    assert meta["task"] == "pole_balancing" and meta["task_params"]["pole_length"] == 0.4
    assert meta["state_columns"] == ["pole_angle", "pole_velocity", "pivot_x", "pivot_y", "pivot_z"]
    with Runner(make_task("pole_balancing", {"pole_length": 0.4}), log=tmp_path / "local.h5", seed=2) as r:
        local = [r.send(c) for c in commands]
    assert [a.reward for a in replies] == [b.reward for b in local]
    (bridged,), (in_process,) = read_episodes(tmp_path / "bridge.h5"), read_episodes(tmp_path / "local.h5")
    assert_same_steps(in_process, bridged, fetched)
    assert bridged.attrs["return"] == in_process.attrs["return"]
    assert bridged.attrs["success"] and upright_for_the_last(bridged.steps, 4.0)  # swung up and balanced
    report = replay(tmp_path / "bridge.h5")
    assert report.identical, report.differences
