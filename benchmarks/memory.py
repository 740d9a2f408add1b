"""A runner's peak memory for the worst episode a learner may send inside the limits: one-sample
segments each held for ``max_wait_time`` (60 s, 30,000 steps at the WAM's 500 Hz), logged.

    python benchmarks/memory.py [--segments 30] [--held-whole]

Prints the episode's steps and how much the process's peak resident memory grew while it ran.
By default the runner streams the episode's steps to its log as it runs (as `episodic serve
--log` does); ``--held-whole`` keeps its episodes (Runner(keep_episodes=True)), which holds every
step until the episode ends, as every logging runner did before streaming.
"""
from __future__ import annotations

import argparse
import resource
import tempfile
import time
from pathlib import Path

from episodic.runtime.runner import Runner
from episodic.tasks import make_task


def peak_rss_mib() -> float:
    """The process's peak resident memory so far, MiB (Linux reports ru_maxrss in KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--segments", type=int, default=30)
    parser.add_argument("--held-whole", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp, \
            Runner(make_task("reach"), log=Path(tmp) / "worst.h5", keep_episodes=args.held_whole) as runner:
        posture = runner.start_episode(1).posture
        runner.send_trajectory(posture[None])
        base, started = peak_rss_mib(), time.perf_counter()
        runner.start_episode(args.segments)
        for _ in range(args.segments):
            runner.send_trajectory(posture[None], wait_time=runner.limits.max_wait_time)
        steps = runner.machine.last_episode.n_steps
        print(f"{args.segments} one-sample segments held {runner.limits.max_wait_time:g} s each, "
              f"{'held whole' if args.held_whole else 'streamed to the log'}: {steps} steps, "
              f"peak RSS grew {peak_rss_mib() - base:.0f} MiB in {time.perf_counter() - started:.1f} s")


if __name__ == "__main__":
    main()
