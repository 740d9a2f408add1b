"""A robot across a faulty network, with real processes: `episodic robot-server`, the fault
relay (episodic.tools.relay) and `episodic serve --robot-at` driven by a learner over the
bridge, against the in-process realtime mode (a Runner in the test's process, its simulation paced). Every fault of
benchmarks/network.py's table: nothing hangs, no finished episode is lost, the robot never
moves once its controller is gone, and tracking matches the in-process mode within what the
link's round trip explains (episodic.runtime.link.tracking_bound)."""
from __future__ import annotations

import contextlib
import signal
import time
from dataclasses import dataclass, field

import numpy as np
import pytest

from episodic.bridge import Client
from episodic.bridge.client import RunnerGone
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
    Trial,
    inprocess_trials,
    probe,
    reach_episode,
    signal_later,
    start_runner,
    with_links,
)
from episodic.tools.relay import Faults

# processes paced in real time: alone on the machine
pytestmark = [pytest.mark.slow, pytest.mark.serial]

FAULTS = {
    "warm-up": Faults(),  # the first episode through a fresh relay may lose states while the processes settle
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


@dataclass
class Runs:
    """What the module's processes did (``runs``)."""

    reference: Trial                 # the in-process realtime mode's episode
    faults: dict[str, Trial]         # each fault's episode through the relay
    robot_killed: Trial | None = None  # the episode whose robot was killed
    after_robot: Flag = Flag.OK      # the next start's flag (no robot at all)
    robot_killed_took: float = 0.0   # s from the start of that episode to the next start's reply
    logged: int = 0                  # episodes in the networked runner's log
    braked: list = field(default_factory=list)  # the robot's states after its runner was killed


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Robot A behind a relay whose faults change between episodes, a networked runner through
    it, robot B with a networked runner straight on it (killed during a move), and the in-process
    realtime mode's episode (a Runner in this process); the processes start side by side (each
    takes seconds to import). Last, robot A is killed during a move of its runner."""
    tmp = tmp_path_factory.mktemp("network")
    with contextlib.ExitStack() as stack:
        robots = [stack.enter_context(contextlib.closing(RobotProcess())) for _ in range(2)]
        a, b = (robot.ready() for robot in robots)
        relay = stack.enter_context(RelayProcess(a.address, Faults()))
        net = stack.enter_context(contextlib.closing(start_runner(tmp / "net.h5", relay.address)))
        doomed = stack.enter_context(contextlib.closing(start_runner(tmp / "doomed.h5", b.address)))
        out = Runs(inprocess_trials(1)[0], {})  # while they start
        doomed.wait_ready()
        with Client(doomed.channel) as client:  # its runner killed 0.1 s into a move: B must brake on its own
            start = client.start_episode(1)
            assert start.flag == Flag.OK and start.posture is not None
            signal_later(doomed, signal.SIGKILL)()
            with pytest.raises(RunnerGone):
                client.send_trajectory(min_jerk(start.posture, start.posture + OFFSET, MOVE_SECONDS, DT).q)
        out.braked = probe(b.address, 0.8)
        b.stop()  # done with: its 500 Hz loop would take a share of a core from the timed episodes below
        net.wait_ready()
        with Client(net.channel) as client:
            for name, faults in FAULTS.items():
                relay.set(faults)
                drop = name == "link drop 200 ms"
                out.faults[name] = reach_episode(client, signal_later(relay, signal.SIGUSR1) if drop else None)
                if drop:
                    time.sleep(faults.drop_for)  # an episode started while the link is down is aborted at once
            relay.set(Faults())
            t0 = time.monotonic()
            out.robot_killed = reach_episode(client, signal_later(a, signal.SIGKILL))
            out.after_robot = client.start_episode(1).flag
            out.robot_killed_took = time.monotonic() - t0
        net.stop()
    out.faults = dict(zip(FAULTS, with_links(list(out.faults.values()), tmp / "net.h5"), strict=True))
    out.logged = len(read_episodes(tmp / "net.h5"))
    return out


def test_every_episode_is_logged_with_its_link_statistics(runs):
    assert runs.logged == len(FAULTS) + 2  # the robot killed in the last but one, the last with none
    for name, trial in runs.faults.items():
        assert trial.logged and trial.link is not None, name
        assert trial.link.states > 0, name


@pytest.mark.parametrize("name", ["none", "delay 1 ms", "delay 5 ms", "delay 20 ms", "jitter", "loss 1 %",
                                  "loss 10 %", "reordering", "after the drop"])
def test_a_slow_or_lossy_link_tracks_as_the_in_process_mode_within_what_its_delay_explains(runs, name):
    reference, trial = runs.reference, runs.faults[name]
    assert trial.flags == (Flag.OK, Flag.OK), trial.message
    assert trial.link is not None
    # the runner sees the robot a round trip (and up to a control period each side) behind its
    # commands: the error grows by at most the desired speed times that delay
    bound = SLACK * reference.tracking + tracking_bound(np.array([trial.speed]), trial.link.rtt_max, DT)
    assert 0 < trial.tracking <= bound, (name, trial.tracking, bound, trial.link)


@pytest.mark.parametrize("name, delay", [("delay 1 ms", 0.001), ("delay 5 ms", 0.005), ("delay 20 ms", 0.020)])
def test_the_round_trip_measured_is_the_relays_delay_both_ways(runs, name, delay):
    link = runs.faults[name].link
    assert link is not None
    # plus the robot's and the runner's ticks (up to a control period each) and the processes' own time
    assert 2 * delay <= link.rtt_p50 <= 2 * delay + 2 * DT + 0.004, link


def test_lost_and_reordered_states_are_counted_and_the_reply_says_so(runs):
    results = runs.faults
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
    results = runs.faults
    drop = results["link drop 200 ms"]
    assert drop.flags == (Flag.OK, Flag.SAFETY_ABORT)
    assert "ms old" in drop.message and "segment aborted, robot holds" in drop.message
    assert drop.link is not None and drop.link.stale_ticks > 0
    assert results["after the drop"].flags == (Flag.OK, Flag.OK)


def test_the_robot_process_killed_aborts_the_segment_and_nothing_hangs(runs):
    killed = runs.robot_killed
    assert killed is not None and killed.flags == (Flag.OK, Flag.SAFETY_ABORT) and "ms old" in killed.message
    assert runs.after_robot == Flag.SAFETY_ABORT  # no robot at all: the start is aborted at once
    assert runs.robot_killed_took < MOVE_SECONDS + 3  # replies within the state bound, not at some timeout


def test_the_runner_killed_leaves_the_robot_braked_and_still(runs):
    states = runs.braked
    assert len(states) > 100
    first = states[0]["stamp"]
    late = [d for d in states if d["stamp"] >= first + 0.5]  # once braked (watchdog 50 ms) and settled
    assert all(Status(int(d["status"])) == Status.HOLDING | Status.WATCHDOG for d in late)
    assert max(np.abs(d["qd"]).max() for d in late) < 0.01  # rad/s
    assert np.abs(late[-1]["q"] - late[0]["q"]).max() < 1e-3  # rad: it never moves again
