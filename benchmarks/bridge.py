"""Bridge overhead against the in-process runner, and an empty command against a raw ping-pong.

Measured side by side in one run (medians of repeats); each line prints its ratio to its goal.

1. A 2 s (1000-step) reach segment plus the episode's full per-step log: over the bridge
   (Client -> `episodic serve` in another process) against the same segment run by an
   in-process Runner. The log is fetched as copies (`get_episode()`) and as views into the
   channel's log block (`get_episode(copy=False)`); the in-process runner's `get_episode()`
   builds its arrays either way. Goal: overhead <= 0.2 ms per segment.
2. The round trip of an empty command (a reset with no episode running) against a raw
   posix_ipc two-semaphore ping-pong between two processes, with the two processes on
   different cores and on one core. Goal: within 3x of the raw ping-pong on one core (the
   ratio on different cores is printed beside it).
The runner process is pinned to one core and the learner to the other, so both sides of each
comparison run where they would in use.

    python benchmarks/bridge.py [--repeats 200]
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time

import numpy as np
import posix_ipc

from episodic.bridge import Client
from episodic.commands import StartCommand, TrajectoryCommand
from episodic.runner import Runner
from episodic.served import ServedRunner, fresh_channel
from episodic.tasks import make_task
from process import MULTI_CORE, pin

PONG = """
import sys, posix_ipc
ping, pong = posix_ipc.Semaphore(sys.argv[1]), posix_ipc.Semaphore(sys.argv[2])
print("ready", flush=True)
while True:
    ping.acquire()
    pong.release()
"""


RUNNER_CORE, LEARNER_CORE = 1, 0
OVERHEAD_GOAL = 0.2e-3  # s per 2 s segment with its full log
ROUND_TRIP_GOAL = 3.0   # empty command round trip / raw ping-pong, on one core


def segment(home: np.ndarray) -> np.ndarray:
    t = np.arange(1, 1001) / 1000
    return home + 0.2 * np.sin(np.pi * t)[:, None] * np.linspace(1.0, 0.3, home.size)


def segments(channel: str, repeats: int) -> tuple[np.ndarray, dict[bool, np.ndarray], int]:
    """Interleaved: the segment in-process (on the runner's core), then over the bridge (learner
    core) with the log copied and as views; s per segment, and the rows of the log."""
    local, bridged = [], {True: [], False: []}
    with Runner(make_task("reach")) as runner, Client(channel, timeout=30) as client:
        q = segment(runner.robot.home)
        for episode_id in range(repeats):
            pin(RUNNER_CORE)
            runner.send(StartCommand(episode_id, 1))
            t0 = time.perf_counter()
            runner.send(TrajectoryCommand(episode_id, 1, 1, q))
            runner.get_episode()  # the in-process log, as named arrays
            local.append(time.perf_counter() - t0)
            runner.episodes.clear()
            pin(LEARNER_CORE)
            for copy in (True, False):
                client.start_episode(max_commands=1)
                t0 = time.perf_counter()
                client.send_trajectory(q)
                log = client.get_episode(copy=copy)
                bridged[copy].append(time.perf_counter() - t0)
    return np.array(local), {copy: np.array(times) for copy, times in bridged.items()}, len(log["time"])


def empty_commands(channel: str, n: int) -> np.ndarray:
    with Client(channel, timeout=30) as client:
        times = []
        for _ in range(n):
            t0 = time.perf_counter()
            client.reset()
            times.append(time.perf_counter() - t0)
    return np.array(times)


def raw_ping_pong(n: int) -> np.ndarray:
    names = (f"/episodic-bench-ping-{os.getpid()}", f"/episodic-bench-pong-{os.getpid()}")
    ping, pong = (posix_ipc.Semaphore(name, posix_ipc.O_CREX, mode=0o600) for name in names)
    proc = subprocess.Popen([sys.executable, "-c", PONG, *names], stdout=subprocess.PIPE, text=True,
                            preexec_fn=lambda: pin(RUNNER_CORE))
    try:
        proc.stdout.readline()
        times = []
        for _ in range(n):
            t0 = time.perf_counter()
            ping.release()
            pong.acquire()
            times.append(time.perf_counter() - t0)
        return np.array(times)
    finally:
        proc.kill()
        proc.wait()
        for sem in (ping, pong):
            sem.unlink()
            sem.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=200)
    args = parser.parse_args()
    channel = fresh_channel("bench")
    n_empty = 5 * args.repeats
    with ServedRunner(channel, task="reach", cores={RUNNER_CORE} if MULTI_CORE else None):
        local, bridged, rows = segments(channel, args.repeats)
        round_trips = {}
        for placement, core in (("other cores", LEARNER_CORE), ("one core", RUNNER_CORE)):
            pin(core)
            round_trips[placement] = (np.median(raw_ping_pong(n_empty)), np.median(empty_commands(channel, n_empty)))
    ms, us = 1e3, 1e6
    print(f"runner pinned to core {RUNNER_CORE}, learner to core {LEARNER_CORE} ({os.cpu_count()} cores)")
    print(f"2 s segment ({rows} logged steps) + full log, median of {args.repeats} interleaved repeats")
    print(f"  {'':24s}{'in-process':>12s}{'bridge':>10s}{'overhead':>10s}   goal {OVERHEAD_GOAL * ms:.1f} ms")
    for copy, label in ((True, "log copied"), (False, "log as views")):
        overhead = np.median(bridged[copy]) - np.median(local)
        print(f"  {label:24s}{np.median(local) * ms:9.3f} ms{np.median(bridged[copy]) * ms:7.3f} ms"
              f"{overhead * ms:7.3f} ms   {overhead / OVERHEAD_GOAL:5.2f}x the goal")
    print(f"empty command round trip, median of {n_empty}")
    print(f"  {'learner and runner on':24s}{'raw ping-pong':>14s}{'bridge':>10s}{'ratio':>8s}"
          f"   goal {ROUND_TRIP_GOAL:.0f}x on one core")
    for placement, (raw, empty) in round_trips.items():
        ratio = empty / raw
        print(f"  {placement:24s}{raw * us:11.1f} us{empty * us:7.1f} us{ratio:7.2f}x"
              f"   {ratio / ROUND_TRIP_GOAL:5.2f}x the goal")


if __name__ == "__main__":
    main()
