"""Every task over the bridge: a real `episodic serve` and a Client give the same replies and a
log bit-identical to the in-process runner's (the per-step log a client fetches included), and
both logs replay bit-identically. Each task runs its scripted reference (examples/) and, where it
has one, a second episode that starts where the first left off."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from episodic.bridge import Client
from episodic.interface.commands import StartCommand, TrajectoryCommand
from episodic.interface.robot import load_robot
from episodic.interface.vocabulary import Flag
from episodic.logs import read_episodes, read_metadata
from episodic.runtime.runner import Runner
from episodic.tasks import TASKS, make_task
from episodic.tasks.ball_in_cup_swing import REFERENCE_SWING, perturbed_swing, swing_commands
from episodic.tools.replay import replay
from examples import (
    ball_bouncing_reference,
    ball_in_cup_reference,
    ball_on_beam_reference,
    ball_paddling_reference,
    beer_pong_reference,
    casting_reference,
    pole_balancing_reference,
    tetherball_reference,
)
from tests.helpers import Served, assert_same_steps, channel_name, shm_leftovers, wave

pytestmark = pytest.mark.slow  # real `episodic serve` processes
WAM = load_robot("wam")


@dataclass(frozen=True)
class Case:
    """One task's episodes: its parameters (name -> value), the run's seed and the commands."""

    params: dict
    seed: int
    commands: list


def reach_commands() -> list:
    commands = [StartCommand(1, 2, context=np.array([0.6, 0.1, 1.5]))]
    return commands + [TrajectoryCommand(1, k, 2, wave(WAM.home, phase=0.1 * (k - 1))) for k in (1, 2)]


CASES = {
    "reach": lambda: Case({"tolerance": 0.05}, 7, reach_commands()),
    "ball_in_cup": lambda: Case({"rest_time": 0.2}, 3, ball_in_cup_reference.reference_commands(WAM, 1)
                                + swing_commands(WAM, perturbed_swing(REFERENCE_SWING, np.random.default_rng(4)), 2)),
    "ball_on_beam": lambda: Case({"beam_length": 0.9, "x0": -0.15}, 3,
                                 ball_on_beam_reference.reference_commands(WAM, episode_id=7)),
    "casting": lambda: Case({"strike_penalty": 0.5}, 0, casting_reference.reference_commands(WAM, 5)
                            + casting_reference.reference_commands(WAM, 6, cup=[0.4, 0.5])),
    "pole_balancing": lambda: Case({"pole_length": 0.4}, 2, pole_balancing_reference.reference_commands(
        WAM, episode_id=5, context=[np.pi - 0.2], pole_length=0.4)),
    "ball_bouncing": lambda: Case({}, 0, ball_bouncing_reference.reference_commands(WAM, 3)
                                  + ball_bouncing_reference.reference_commands(WAM, 4, [0.4, 0.6, 0.02, -0.02],
                                                                               segments=2, segment_time=2.0)),
    "ball_paddling": lambda: Case({"min_hits": 8}, 4, ball_paddling_reference.reference_commands(WAM, 5)
                                  + ball_paddling_reference.reference_commands(WAM, 6, apex=0.47)),
    "beer_pong": lambda: Case({}, 0, beer_pong_reference.reference_commands(WAM, 5)
                              + beer_pong_reference.reference_commands(WAM, 6, [1.6 * np.cos(0.3), 1.6 * np.sin(0.3)])),
    "tetherball": lambda: Case({}, 0, tetherball_reference.reference_commands(WAM, 5)
                               + tetherball_reference.reference_commands(
                                   WAM, 6, [0.85, -np.sin(np.radians(55)), 2.35 - np.cos(np.radians(55))])),
}


def test_every_task_has_a_case():
    assert set(CASES) == set(TASKS)


@pytest.mark.parametrize("name", sorted(CASES))
def test_task_over_the_bridge_is_bit_identical_and_replays(name, tmp_path: Path):
    case = CASES[name]()
    before = shm_leftovers()
    args = ["--seed", str(case.seed)] + [a for k, v in case.params.items() for a in ("--param", f"{k}={v}")]
    with Served(channel_name(), tmp_path / "bridge.h5", *args, task=name) as served:
        with Client(served.channel, timeout=30) as client:
            replies = [client.send(c) for c in case.commands]
            fetched = client.get_episode()
        assert served.stop() == 0
    assert shm_leftovers() == before
    with Runner(make_task(name, case.params), log=tmp_path / "local.h5", seed=case.seed) as runner:
        local = [runner.send(c) for c in case.commands]

    assert [r.flag for r in replies] == [Flag.OK] * len(case.commands), [r.message for r in replies]
    assert [r.reward for r in replies] == [r.reward for r in local]
    assert [r.state.tobytes() for r in replies] == [r.state.tobytes() for r in local]
    bridged, here = read_episodes(tmp_path / "bridge.h5"), read_episodes(tmp_path / "local.h5")
    assert len(bridged) == len(here) == sum(isinstance(c, StartCommand) for c in case.commands)
    for b, h in zip(bridged, here):
        assert_same_steps(h, b)
        assert b.attrs["return"] == h.attrs["return"]
    assert_same_steps(here[-1], bridged[-1], fetched)
    if name != "reach":
        assert bridged[0].attrs["success"], "the scripted reference solves the task"
    meta = read_metadata(tmp_path / "bridge.h5")
    assert meta["task"] == name and all(meta["task_params"][k] == v for k, v in case.params.items())
    for log in ("bridge.h5", "local.h5"):
        report = replay(tmp_path / log)
        assert report.identical, report.differences
        assert len(report.episodes) == len(bridged)
