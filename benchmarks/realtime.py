"""Non-blocking mode timing: `episodic serve --mode realtime` at the robot's control rate for
60 s with a learner in another process, then the tick period error (|actual period - control
period|) at p50 / p99 / max and the missed deadlines, over the whole run and per episode (goals:
p99 under 0.2 ms, no deadline missed, episode ends included), the runner's resident memory after
the first RSS_AFTER s and at the end with its growth over that span and over the second half of
the run (past the allocators' warm-up), and the episodes on disk.

The learner runs reach episodes (start + 3 one-second segments) with think times of 0 to
``--think`` s (default 0.3) between commands, so the runner both moves and holds; ``--think 0``
is a prompt learner that leaves the runner almost no idle tick, so its log is written in the
ticks of the segments. The runner is pinned to one core and the learner to the other.
``--priority N`` serves the runner under SCHED_FIFO at priority N with its memory locked
(`episodic serve --priority`; root or CAP_SYS_NICE).

The missed deadlines are judged against the machine's floor in the same run: a bare Pacer loop
(no work at all) on the runner's core under the same scheduling, in a process of its own, for
``--floor`` s in all (default: as long as the runner's run), half just before the run and half
just after it, so that it meets the machine as the run does: the misses the machine itself
causes (other processes, interrupts, a hypervisor taking the core away). Goal: the runner misses
no more deadlines per minute than the floor, PASS or FAIL (``--floor 0`` skips the floor and
judges against no miss at all).

    python benchmarks/realtime.py [--seconds 60] [--think 0.3] [--priority 80] [--floor 60]
"""
from __future__ import annotations

import argparse
import json
import multiprocessing
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import h5py
import numpy as np

from episodic.bridge import Client
from episodic.interface.robot import load_robot
from episodic.interface.trajectory import min_jerk
from episodic.logs import read_episodes
from episodic.logs.timing import Timing
from episodic.runtime.pacing import Pacer
from episodic.runtime.scheduling import REALTIME_PRIORITY, Scheduling, SchedulingError, describe, set_realtime
from episodic.tools.served import ServedRunner, fresh_channel
from process import MULTI_CORE, pin, rss_kib

RUNNER_CORE, LEARNER_CORE = 1, 0
HOME = np.array([0, 0.5876, 0, 1.36, 0, -0.321, -1.57])
RSS_AFTER = 5.0  # s into the run of the first memory reading (start-up allocations done)



def slope(memory: list[tuple[float, float]]) -> float:
    """Growth MB/min of the least-squares line through (time s, resident memory MB) readings."""
    if len(memory) < 2:
        return 0.0
    t, mb = np.array(memory).T
    return float(np.polyfit(t - t[0], mb, 1)[0] * 60)



def bare_loop(seconds: float, dt: float, priority: int | None) -> tuple[Timing, Scheduling]:
    """A Pacer ticking every ``dt`` s for ``seconds`` s with no work, on the runner's core and
    scheduled as the served runner is: SCHED_FIFO at ``priority`` with locked memory, or when None
    at serve's REALTIME_PRIORITY where permitted (else as this process is scheduled); its tick
    statistics and the scheduling it had. Run it in a process of its own."""
    pin(RUNNER_CORE)
    try:
        scheduling = set_realtime(REALTIME_PRIORITY if priority is None else priority)
    except SchedulingError:
        if priority is not None:
            raise
        scheduling = describe()
    pacer = Pacer(dt)
    for _ in range(round(seconds / dt)):
        pacer.wait()
    return pacer.timing(), scheduling


def floor(seconds: float, dt: float, priority: int | None) -> tuple[Timing, Scheduling]:
    """``bare_loop`` in a forked process (its scheduling ends with it)."""
    with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("fork")) as pool:
        return pool.submit(bare_loop, seconds, dt, priority).result()


def per_minute(missed: int, ticks: int, dt: float) -> float:
    """Missed deadlines per minute of ``ticks`` ticks of ``dt`` s."""
    return 60.0 * missed / max(ticks * dt, dt)


def learn(channel: str, seconds: float, think: float, rng: np.random.Generator, at_rss: Callable[[], None]) -> int:
    """Reach episodes for ``seconds`` s, waiting 0 to ``think`` s before each segment; calls
    ``at_rss()`` after each episode once RSS_AFTER s have passed. The number of episodes run."""
    episodes = 0
    begin = time.monotonic()
    end = begin + seconds
    with Client(channel, timeout=30) as client:
        while time.monotonic() < end:
            goal = HOME + rng.uniform(-0.3, 0.3, HOME.size)
            client.start_episode(max_commands=3)
            q = HOME
            for target in (goal, HOME, goal):
                time.sleep(rng.uniform(0.0, think))
                client.send_trajectory(min_jerk(q, target, 1.0, 0.002).q)
                q = target
            episodes += 1
            if time.monotonic() - begin > RSS_AFTER:
                at_rss()
    return episodes


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--think", type=float, default=0.3, help="longest think time before a segment, s")
    parser.add_argument("--priority", type=int, choices=range(1, 100), metavar="1..99", default=None,
                        help="serve the runner under SCHED_FIFO at this priority, memory locked "
                             "(default: serve's, 50 where permitted)")
    parser.add_argument("--floor", type=float, default=None, metavar="SECONDS",
                        help="a bare Pacer loop this long in all on the runner's core, same scheduling, half before "
                             "and half after the run (default: as long as the run; 0: skip)")
    args = parser.parse_args()
    floor_seconds = args.seconds if args.floor is None else args.floor
    control_dt = load_robot().control_dt
    bare = [floor(floor_seconds / 2, control_dt, args.priority)] if floor_seconds > 0 else []
    channel = fresh_channel("rtbench")
    with tempfile.TemporaryDirectory() as tmp:
        log = Path(tmp) / "realtime.h5"
        with ServedRunner(channel, task="reach", log=log, mode="realtime", priority=args.priority,
                          cores={RUNNER_CORE} if MULTI_CORE else None) as runner:
            pin(LEARNER_CORE)
            memory = []
            episodes = learn(channel, args.seconds, args.think, np.random.default_rng(0),
                             lambda: memory.append((time.monotonic(), rss_kib(runner.proc.pid) / 1024)))
            memory.append((time.monotonic(), rss_kib(runner.proc.pid) / 1024))
            runner.stop(check=True)
        if bare:
            bare.append(floor(floor_seconds / 2, control_dt, args.priority))
        with h5py.File(log) as f:
            run = dict(f.attrs)
        per_episode = [dict(ep.attrs) for ep in read_episodes(log)]
    dt = 1.0 / float(run["control_rate"])
    ticks, missed = int(run["timing_ticks"]), int(run["timing_missed"])
    us = 1e6
    print(f"realtime runner at {1 / dt:g} Hz for {ticks * dt:.1f} s ({ticks} ticks, {episodes} learner episodes), "
          f"runner on core {RUNNER_CORE}, learner on core {LEARNER_CORE}, think times 0-{args.think:g} s")
    print(f"  scheduling       {scheduled(run.get('scheduling'))}")
    print(f"  period error p50 {run['timing_period_error_p50'] * us:8.1f} us")
    print(f"  period error p99 {run['timing_period_error_p99'] * us:8.1f} us   (goal < 200 us)")
    print(f"  period error max {run['timing_period_error_max'] * us:8.1f} us")
    rate = per_minute(missed, ticks, dt)
    print(f"  missed deadlines {missed:8d}      ({100 * missed / max(ticks, 1):.3f} % of ticks, {rate:.1f}/min)")
    if bare:
        floor_ticks, floor_missed = sum(t.ticks for t, _ in bare), sum(t.missed for t, _ in bare)
        floor_rate = per_minute(floor_missed, floor_ticks, dt)
        for (timing, scheduling), when in zip(bare, ("before", "after")):
            print(f"  machine floor    {timing.missed:8d}      ({100 * timing.missed / max(timing.ticks, 1):.3f} % of "
                  f"{timing.ticks} ticks), p99 {timing.period_error_p99 * us:.1f} us, max "
                  f"{timing.period_error_max * us:.1f} us: a bare Pacer loop, no work, {floor_seconds / 2:g} s on "
                  f"core {RUNNER_CORE} {when} the run, {scheduling.summary()}")
        print(f"  goal: missed deadlines no more than the floor's: {rate:.1f}/min against {floor_rate:.1f}/min  "
              f"{'PASS' if rate <= floor_rate else 'FAIL'}")
    else:
        print(f"  goal: no missed deadline (no floor measured)  {'PASS' if missed == 0 else 'FAIL'}")
    first, last = memory[0][1], memory[-1][1]
    print(f"  runner memory    {first:8.1f} MB after {RSS_AFTER:g} s, {last:.1f} MB at the end "
          f"({slope(memory):+.2f} MB/min; {slope(memory[len(memory) // 2:]):+.2f} MB/min over the second half)")
    print(f"  episodes logged  {len(per_episode):8d}")
    timed = [e for e in per_episode if "timing_period_error_p99" in e]
    if timed:
        p99 = np.array([e["timing_period_error_p99"] for e in timed])
        late = sum(int(e["timing_missed"]) > 0 for e in timed)
        print(f"  per-episode p99: median {np.median(p99) * us:.1f} us, worst {p99.max() * us:.1f} us "
              f"over {p99.size} episodes; {late} episodes with a missed deadline")


def scheduled(attr: str | bytes | None) -> str:
    """The runner's scheduling as its log's root attribute 'scheduling' (JSON) records it."""
    if attr is None:
        return "not recorded"
    scheduling = Scheduling(**json.loads(attr))
    throttling = {-1: "off", None: "unknown"}.get(scheduling.rt_runtime_us,
                                                   f"{scheduling.rt_runtime_us} us of {scheduling.rt_period_us}")
    return f"{scheduling.summary()}; kernel RT throttling {throttling}"


if __name__ == "__main__":
    main()
