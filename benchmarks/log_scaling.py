"""How the HDF5 run log scales with the length of a run.

    python benchmarks/log_scaling.py [--episodes 10000] [--refusals 30000]

One blocking reach runner logging to a temporary file:
(a) refusals: commands refused outside any episode (each appends a row to /rejected); the
    time per refusal over the first 1,000 and over 1,000 more after ``--refusals`` of them;
(b) episodes: ``--episodes`` short episodes (a start and one 50-step segment each); the
    runner's resident memory (RSS) at episode 1,000 and at the last, and its growth in %;
(c) ``episodic info`` on the resulting log: the wall time of the command in a subprocess
    (interpreter start and imports included) and of the command itself, in-process.

Goals: a refusal costs the same after 30,000 as at the start; memory stays flat (growth
within noise, a few %); info answers in under a second.
"""
from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from click.testing import CliRunner

from episodic.cli import main as cli
from episodic.commands import StartCommand, TrajectoryCommand
from episodic.protocol import Flag
from episodic.runner import Runner
from episodic.tasks import make_task
from process import rss_kib

TIMED = 1000           # refusals per timed batch
SEGMENT_STEPS = 50     # control steps per episode's one segment
RSS_FROM = 1000        # episode whose RSS is the baseline



def refusal_ms(runner: Runner, q, first: int, n: int) -> float:
    """Mean ms per refusal over refusals first .. first + n - 1 (segments with no episode running)."""
    t0 = time.perf_counter()
    for k in range(first, first + n):
        reply = runner.send(TrajectoryCommand(1_000_000 + k, 1, 1, q))
        assert reply.flag == Flag.OUT_OF_ORDER, reply
    return 1e3 * (time.perf_counter() - t0) / n


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--episodes", type=int, default=10_000, help="short episodes to log (> 1000)")
    parser.add_argument("--refusals", type=int, default=30_000, help="refusals before the second timing")
    args = parser.parse_args()
    if args.episodes <= RSS_FROM:
        parser.error(f"--episodes must exceed {RSS_FROM}")

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "scaling.h5"
        with Runner(make_task("reach"), log=path, seed=0, keep_episodes=False) as runner:
            q = runner.robot.home[None].repeat(SEGMENT_STEPS, axis=0)
            start = refusal_ms(runner, q, 0, TIMED)
            refusal_ms(runner, q, TIMED, args.refusals - TIMED)
            later = refusal_ms(runner, q, args.refusals, TIMED)
            print(f"refusal: {start:.3f} ms at the start, {later:.3f} ms after {args.refusals:,} refusals")

            t0 = time.perf_counter()
            for episode in range(1, args.episodes + 1):
                runner.send(StartCommand(episode, 1))
                reply = runner.send(TrajectoryCommand(episode, 1, 1, q))
                assert reply.flag == Flag.OK and not reply.message, reply
                if episode == RSS_FROM:
                    baseline = rss_kib()
            end = rss_kib()
            seconds = time.perf_counter() - t0
        print(f"episodes: {args.episodes:,} in {seconds:.1f} s ({1e3 * seconds / args.episodes:.2f} ms each); "
              f"runner RSS {baseline / 1024:.1f} MiB at episode {RSS_FROM:,}, {end / 1024:.1f} MiB at "
              f"{args.episodes:,}: {100 * (end - baseline) / baseline:+.1f} %")

        t0 = time.perf_counter()
        done = subprocess.run([sys.executable, "-m", "episodic", "info", str(path)], capture_output=True, text=True)
        whole = time.perf_counter() - t0
        if done.returncode != 0:
            sys.exit(f"episodic info failed: {done.stderr}")
        t0 = time.perf_counter()
        result = CliRunner().invoke(cli, ["info", str(path)], catch_exceptions=False)
        command = time.perf_counter() - t0
        assert result.exit_code == 0, result.output
        print(f"episodic info on the {path.stat().st_size / 2**20:.0f} MiB log: {whole:.2f} s in a subprocess, "
              f"{command:.2f} s for the command itself ({len(done.stdout.splitlines()):,} lines)")


if __name__ == "__main__":
    main()
