"""A robot across a faulty network: `episodic robot-server` behind a fault-injecting relay
(episodic.tools.relay), driven by a realtime runner's network driver (`episodic serve
--robot-at`), against the in-process realtime mode. For each fault, over ``--episodes`` reach
episodes (episodic.tools.link_lab: a 0.5 s minimum-jerk move of 0.15 rad on every joint): the
tracking error (RMS of q - q_d over the move, mean over the episodes, mrad), the bound the link's
round trip allows for it (the in-process error plus ``tracking_bound``: the RMS desired speed
times the round trip's maximum plus two control periods), the round trip p50/p99 (ms), states
lost and reordered, segments aborted and episodes lost (not logged).

    python benchmarks/network.py [--episodes 3]
"""
from __future__ import annotations

import argparse
import signal
import tempfile
import time
from pathlib import Path

import numpy as np

from episodic.bridge import Client
from episodic.interface.trajectory import min_jerk
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
    serving,
    signal_later,
    trials,
    with_links,
)
from episodic.tools.relay import Faults
from episodic.tools.served import ServedRunner, fresh_channel

BRAKE_SETTLE = 0.3  # s after the runner's death before the robot must be still
PROBE = 0.2         # s of the robot's states looked at then

FAULTS: dict[str, Faults] = {
    "none (loopback)": Faults(),
    "delay 1 ms": Faults(delay=0.001),
    "delay 5 ms": Faults(delay=0.005),
    "delay 20 ms": Faults(delay=0.020),
    "delay 5 ms, jitter 2 ms": Faults(delay=0.005, jitter=0.002),
    "loss 1 %": Faults(loss=0.01),
    "loss 10 %": Faults(loss=0.10),
    "reorder 10 %": Faults(delay=0.001, reorder=0.10),
    "link drop 200 ms": Faults(drop_for=0.2),
}


def row(name: str, results: list[Trial], reference: float) -> str:
    tracking = float(np.mean([t.tracking for t in results]))
    links = [t.link for t in results if t.link is not None]
    rtt_max = max((link.rtt_max for link in links), default=0.0)
    speed = float(np.mean([t.speed for t in results]))
    bound = reference + tracking_bound(np.array([speed]), rtt_max, DT) if links else float("nan")
    p50 = np.median([link.rtt_p50 for link in links]) * 1e3 if links else float("nan")
    p99 = max((link.rtt_p99 for link in links), default=float("nan")) * 1e3
    lost = sum(link.lost for link in links)
    reordered = sum(link.reordered for link in links)
    aborted = sum(t.aborted for t in results)
    missing = sum(not t.logged for t in results)
    return (f"| {name} | {tracking * 1e3:.2f} | {bound * 1e3:.2f} | {p50:.1f} | {p99:.1f} | {lost} | {reordered} "
            f"| {aborted} | {missing} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--episodes", type=int, default=3)
    n = parser.parse_args().episodes
    with tempfile.TemporaryDirectory() as tmp:
        logs = (Path(tmp) / f"{i}.h5" for i in range(100))
        inprocess = inprocess_trials(n)
        reference = float(np.mean([t.tracking for t in inprocess]))
        print("| fault | tracking error mrad | bound mrad | round trip p50 ms | p99 ms | states lost | reordered "
              "| segments aborted | episodes lost |")
        print("|---|---|---|---|---|---|---|---|---|")
        print(row("in-process realtime", inprocess, reference), flush=True)
        with RobotProcess() as robot:
            log = next(logs)
            with RelayProcess(robot.address, Faults()) as relay, serving(log, relay.address) as (served, client):
                results: dict[str, list[Trial]] = {}
                for name, faults in FAULTS.items():
                    relay.set(faults)
                    drop = name == "link drop 200 ms"
                    results[name] = []
                    for _ in range(n):
                        results[name].append(reach_episode(client, signal_later(relay, signal.SIGUSR1) if drop
                                                           else None))
                        if drop:
                            time.sleep(faults.drop_for)  # the link back before the next episode starts
                served.stop()
            linked = iter(with_links([t for name in FAULTS for t in results[name]], log))
            for name in FAULTS:
                print(row(name, [next(linked) for _ in range(n)], reference), flush=True)
            print(runner_killed(robot, next(logs)), flush=True)
            killed = trials(n, next(logs), robot.address, during=lambda i: signal_later(robot, signal.SIGKILL))
            print(row("robot process killed (then gone)", killed, reference), flush=True)


def runner_killed(robot: RobotProcess, log: Path) -> str:
    """The runner killed 0.1 s into a move: the robot's largest joint speed (rad/s) from
    BRAKE_SETTLE s after its watchdog to PROBE s later, and its status."""
    with ServedRunner(fresh_channel("link"), task="reach", log=log, mode="realtime",
                      args=("--robot-at", robot.address, "--quiet")) as served:
        served.wait_ready()
        with Client(served.channel, timeout=3.0) as client:
            start = client.start_episode(1)
            assert start.posture is not None
            q = min_jerk(start.posture, start.posture + OFFSET, MOVE_SECONDS, DT).q
            signal_later(served, signal.SIGKILL)()
            try:
                client.send_trajectory(q)
            except Exception:  # noqa: BLE001 - the runner is dead: no reply comes
                pass
    states = probe(robot.address, BRAKE_SETTLE + PROBE)
    late = [d for d in states if d["stamp"] >= states[0]["stamp"] + BRAKE_SETTLE]
    speed = max(float(np.max(np.abs(d["qd"]))) for d in late)
    status = Status(int(late[-1]["status"]))
    return (f"| runner killed (the robot {BRAKE_SETTLE} s on: max speed {speed:.4f} rad/s, {status!r}) "
            f"| | | | | | | | 1 |")


if __name__ == "__main__":
    t0 = time.monotonic()
    main()
    print(f"({time.monotonic() - t0:.0f} s)")
