"""Every task over the bridge: a real `episodic serve` and a Client give the same replies and a
log bit-identical to the in-process runner's (the per-step log a client fetches included), and
both logs replay bit-identically. Each task of the registry (built-in and installed) runs its
scripted reference (Task.reference), then a second, short episode (the reference's start and first
segment, cut to 0.2 s) starting where the first left off, then a crash and holding still
(examples/early_end.py: over the bridge as in-process, a crash never beats holding still, which
never beats the reference), with every parameter given on serve's command line at its default
value; a task without a reference is skipped, saying so. The bridge's log is replayed; the
in-process log, the same bits step for step, would replay the same."""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path

import pytest

from episodic.bridge import Client
from episodic.interface.commands import GainsCommand, StartCommand, TrajectoryCommand
from episodic.interface.robot import load_robot
from episodic.interface.vocabulary import Flag
from episodic.logs import read_episodes, read_metadata
from episodic.runtime.runner import Runner
from episodic.tasks import make_task, reference_commands, registry
from episodic.tools.replay import replay
from examples.early_end import three_episodes
from tests.helpers import Served, assert_same_steps, channel_name, reference_cases, shm_leftovers

pytestmark = pytest.mark.slow  # real `episodic serve` processes
WAM = load_robot("wam")


@dataclass(frozen=True)
class Case:
    """One task's episodes: its parameters (name -> value), the run's seed and the commands."""

    params: dict
    seed: int
    commands: list


SHORT = 0.2  # s: the longest a gain set waits and a segment lasts in the second, shortened episode


def shortened(commands: list, episode_id: int) -> list:
    """The commands of an episode up to its first segment (its first gain set when it has none),
    renumbered as ``episode_id``, each gain set waiting and the segment lasting at most SHORT s:
    an episode that starts where a whole one left off, at a fraction of its cost."""
    first = next((k for k, c in enumerate(commands) if isinstance(c, TrajectoryCommand)), 1)  # else a gain set
    kept = []
    for c in commands[: first + 1]:
        if isinstance(c, TrajectoryCommand):
            n = int(round(SHORT * (c.rate or WAM.control_rate)))
            c = dataclasses.replace(c, q=c.q[:n], qd=None if c.qd is None else c.qd[:n],
                                    qdd=None if c.qdd is None else c.qdd[:n], wait_time=0.0)
        elif isinstance(c, GainsCommand):
            c = dataclasses.replace(c, wait_time=min(c.wait_time, SHORT))
        kept.append(dataclasses.replace(c, episode_id=episode_id, max_commands=first))
    return kept


def task_case(name: str) -> Case:
    """The task's reference (episode id 1), then its start and first segment shortened (id 2),
    then early_end's crash (id 3) and hold (id 4); its parameters at their defaults."""
    cls = registry()[name]
    reference = reference_commands(cls)
    early = three_episodes(name)
    ended = [dataclasses.replace(c, episode_id=episode_id) for episode_id, kind in ((3, "crash"), (4, "hold"))
             for c in early[kind]]
    return Case(cls().params(), 0, reference(WAM, 1) + shortened(reference(WAM, 2), 2) + ended)


@pytest.mark.parametrize("name", reference_cases())
def test_task_over_the_bridge_is_bit_identical_and_replays(name, tmp_path: Path):
    case = task_case(name)
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

    crash = len(case.commands) - 3  # its segment's reply: the crash is stopped by the safety check
    assert [r.flag for r in replies] == [Flag.OK] * crash + [Flag.SAFETY_ABORT] + [Flag.OK] * 2, \
        [r.message for r in replies]
    assert replies[crash].episode_done and replies[crash].n_steps * WAM.control_dt < 0.1
    assert [r.reward for r in replies] == [r.reward for r in local]
    assert [r.state.tobytes() for r in replies] == [r.state.tobytes() for r in local]
    bridged, here = read_episodes(tmp_path / "bridge.h5"), read_episodes(tmp_path / "local.h5")
    assert len(bridged) == len(here) == sum(isinstance(c, StartCommand) for c in case.commands)
    for b, h in zip(bridged, here):
        assert_same_steps(h, b)
        assert b.attrs["return"] == h.attrs["return"]
    assert_same_steps(here[-1], bridged[-1], fetched)
    assert bridged[0].attrs["success"], "the scripted reference solves the task"
    reference, _, crashed, held = (ep.attrs["return"] for ep in bridged)
    assert crashed <= held <= reference
    meta = read_metadata(tmp_path / "bridge.h5")
    assert meta["task"] == name and all(meta["task_params"][k] == v for k, v in case.params.items())
    report = replay(tmp_path / "bridge.h5")  # and so the in-process log, whose steps are the same bits
    assert report.identical, report.differences
    assert len(report.episodes) == len(bridged)
