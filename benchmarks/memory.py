"""A runner's peak memory for the worst episode a learner may send inside the limits: one-sample
segments each held for ``max_wait_time`` (60 s, 30,000 steps at the WAM's 500 Hz).

    python benchmarks/memory.py [--segments 30] [--held-whole | --no-log]

Prints the episode's steps, the segments the runner accepted and how much the process's peak
resident memory grew while it ran. By default the runner streams the episode's steps to its log
as it runs (as `episodic serve --log` does); ``--held-whole`` keeps its episodes
(Runner(keep_episodes=True)) and ``--no-log`` has no log, so that the runner holds the steps in
memory, at most Limits.max_held_steps (1,000,000: the 34th segment is refused).
"""
from __future__ import annotations

import argparse
import resource
import tempfile
import time
from pathlib import Path

from episodic.interface.vocabulary import Flag
from episodic.runtime.runner import Runner
from episodic.tasks import make_task


def peak_rss_mib() -> float:
    """The process's peak resident memory so far, MiB (Linux reports ru_maxrss in KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--segments", type=int, default=30)
    how = parser.add_mutually_exclusive_group()
    how.add_argument("--held-whole", action="store_true", help="log, and keep the episodes")
    how.add_argument("--no-log", action="store_true", help="no log (the episodes kept)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp, \
            Runner(make_task("reach"), log=None if args.no_log else Path(tmp) / "worst.h5",
                   keep_episodes=args.held_whole or args.no_log) as runner:
        posture = runner.start_episode(1).posture
        runner.send_trajectory(posture[None])
        base, started = peak_rss_mib(), time.perf_counter()
        runner.start_episode(args.segments)
        accepted = 0
        for _ in range(args.segments):
            reply = runner.send_trajectory(posture[None], wait_time=runner.limits.max_wait_time)
            if reply.flag != Flag.OK:
                print(f"segment {accepted + 1} refused: {reply.flag.name} ({reply.message})")
                break
            accepted += 1
        steps = runner.machine.last_episode.n_steps
        how = "no log" if args.no_log else "held whole" if args.held_whole else "streamed to the log"
        print(f"{args.segments} one-sample segments held {runner.limits.max_wait_time:g} s each, {how}: "
              f"{accepted} accepted, {steps} steps, peak RSS grew {peak_rss_mib() - base:.0f} MiB in "
              f"{time.perf_counter() - started:.1f} s")


if __name__ == "__main__":
    main()
