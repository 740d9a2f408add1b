"""A robot across a faulty network, with real processes: `episodic robot-server`, the fault
relay (episodic.tools.relay) and `episodic serve --robot-at` driven by a learner over the
bridge, against `episodic serve --mode realtime` (the in-process realtime mode). Every fault of
benchmarks/network.py's table: nothing hangs, no finished episode is lost, the robot never
moves once its controller is gone, and tracking matches the in-process mode within what the
link's round trip explains (episodic.runtime.link.tracking_bound)."""
from __future__ import annotations

import signal
import time

import numpy as np
import pytest

from episodic.interface.trajectory import min_jerk
from episodic.interface.vocabulary import Flag
from episodic.logs import read_episodes
from episodic.runtime.link import Status, tracking_bound
from episodic.tools.link_lab import (
    DT,
    MOVE_SECONDS,
    OFFSET,
    RelayProcess,
    RobotProcess,
    probe,
    reach_episode,
    serving,
    signal_later,
    trials,
    with_links,
)
from episodic.tools.relay import Faults

# processes paced in real time: alone on the machine
pytestmark = [pytest.mark.slow, pytest.mark.serial]

FAULTS = {
    "none": Faults(),
    "delay 1 ms": Faults(delay=0.001),
    "delay 5 ms": Faults(delay=0.005),
    "delay 20 ms": Faults(delay=0.020),
    "jitter": Faults(delay=0.005, jitter=0.002),
    "loss 1 %": Faults(loss=0.01),
    "loss 10 %": Faults(loss=0.10),
    "reordering": Faults(delay=0.001, reorder=0.10),
    "link drop 200 ms": Faults(drop_for=0.2),
    "after the drop": Faults(),
}
SLACK = 1.1  # the in-process error's share that varies from episode to episode (where the start settled)


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Each fault's reach episode (one served runner through one relay whose faults change
    between episodes), and the in-process realtime mode's (the reference)."""
    tmp = tmp_path_factory.mktemp("network")
    reference = trials(1, tmp / "inprocess.h5")[0]
    with RobotProcess() as robot, RelayProcess(robot.address, Faults()) as relay:
        with serving(tmp / "net.h5", relay.address) as (served, client):
            results = []
            for name, faults in FAULTS.items():
                relay.set(faults)
                drop = name == "link drop 200 ms"
                results.append(reach_episode(client, (lambda: signal_later(relay, signal.SIGUSR1)()) if drop else None))
            served.stop()
    return reference, dict(zip(FAULTS, with_links(results, tmp / "net.h5"), strict=True))


def test_every_episode_is_logged_with_its_link_statistics(runs):
    _, results = runs
    for name, trial in results.items():
        assert trial.logged and trial.link is not None, name
        assert trial.link.states > 0, name


@pytest.mark.parametrize("name", ["none", "delay 1 ms", "delay 5 ms", "delay 20 ms", "jitter", "loss 1 %",
                                  "loss 10 %", "reordering", "after the drop"])
def test_a_slow_or_lossy_link_tracks_as_the_in_process_mode_within_what_its_delay_explains(runs, name):
    reference, results = runs
    trial = results[name]
    assert trial.flags == (Flag.OK, Flag.OK), trial.message
    assert trial.link is not None
    # the runner sees the robot a round trip (and up to a control period each side) behind its
    # commands: the error grows by at most the desired speed times that delay
    bound = SLACK * reference.tracking + tracking_bound(np.array([trial.speed]), trial.link.rtt_max, DT)
    assert 0 < trial.tracking <= bound, (name, trial.tracking, bound, trial.link)


@pytest.mark.parametrize("name, delay", [("delay 1 ms", 0.001), ("delay 5 ms", 0.005), ("delay 20 ms", 0.020)])
def test_the_round_trip_measured_is_the_relays_delay_both_ways(runs, name, delay):
    link = runs[1][name].link
    assert link is not None
    # plus the robot's and the runner's ticks (up to a control period each) and the processes' own time
    assert 2 * delay <= link.rtt_p50 <= 2 * delay + 2 * DT + 0.004, link


def test_lost_and_reordered_states_are_counted_and_the_reply_says_so(runs):
    results = runs[1]
    for name in ("loss 1 %", "loss 10 %"):
        link = results[name].link
        assert link is not None and link.lost > 0, (name, link)
        assert "states lost" in results[name].message, name
    assert results["loss 10 %"].link.lost > results["loss 1 %"].link.lost  # type: ignore[union-attr]
    reordering = results["reordering"].link
    assert reordering is not None and reordering.reordered > 0
    assert results["none"].link.lost == results["none"].link.reordered == 0  # type: ignore[union-attr]
    assert results["none"].message == ""


def test_a_link_drop_aborts_the_segment_and_the_next_episode_runs(runs):
    results = runs[1]
    drop = results["link drop 200 ms"]
    assert drop.flags == (Flag.OK, Flag.SAFETY_ABORT)
    assert "ms old" in drop.message and "segment aborted, robot holds" in drop.message
    assert drop.link is not None and drop.link.stale_ticks > 0
    assert results["after the drop"].flags == (Flag.OK, Flag.OK)


def test_the_robot_process_killed_aborts_the_segment_and_nothing_hangs(tmp_path):
    with RobotProcess() as robot:
        with serving(tmp_path / "killed.h5", robot.address) as (served, client):
            t0 = time.monotonic()
            killed = reach_episode(client, signal_later(robot, signal.SIGKILL))
            again = client.start_episode(1)  # no robot at all now
            took = time.monotonic() - t0
            served.stop()
    assert killed.flags == (Flag.OK, Flag.SAFETY_ABORT) and "ms old" in killed.message
    assert again.flag == Flag.SAFETY_ABORT
    assert took < MOVE_SECONDS + 5  # replies within the state bound, not at some timeout
    assert len(read_episodes(tmp_path / "killed.h5")) == 2  # both episodes kept


def test_the_runner_killed_leaves_the_robot_braked_and_still(tmp_path):
    with RobotProcess() as robot:
        with serving(tmp_path / "runner.h5", robot.address) as (served, client):
            start = client.start_episode(1)
            assert start.flag == Flag.OK and start.posture is not None
            q = min_jerk(start.posture, start.posture + OFFSET, MOVE_SECONDS, DT).q
            signal_later(served, signal.SIGKILL, after=0.1)()
            with pytest.raises(Exception):  # noqa: B017 - whatever the client says of a dead runner
                client.send_trajectory(q)
        states = probe(robot.address, 0.8)
    assert len(states) > 100
    first = states[0]["stamp"]
    late = [d for d in states if d["stamp"] >= first + 0.5]  # once braked (watchdog 50 ms) and settled
    assert all(Status(int(d["status"])) == Status.HOLDING | Status.WATCHDOG for d in late)
    assert max(np.abs(d["qd"]).max() for d in late) < 0.01  # rad/s
    assert np.abs(late[-1]["q"] - late[0]["q"]).max() < 1e-3  # rad: it never moves again
