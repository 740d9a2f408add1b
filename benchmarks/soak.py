"""Soak: many episodes over the bridge with a log, watching the runner for leaks.

    python benchmarks/soak.py [--episodes 10000] [--seed 0]

Starts a blocking ``episodic serve --task reach --log <tmp>/soak.h5`` in a subprocess and runs
``--episodes`` episodes against it through a Client: each a start with a random target as its
context and one 50-sample segment, a small minimum-jerk move from the posture the start
reached. Every 100th episode the learner also fetches the episode's log over the channel and,
before that episode's start, sends three commands that must be refused: a segment with no
episode running, a segment with a NaN sample and a start with a NaN context.

The runner process is sampled after episode 1,000 and after the last: its resident memory
(VmRSS of /proc/<pid>/status), its open file descriptors (/proc/<pid>/fd, those on the log
counted once) and the /dev/shm
entries of its channel (the count over all of this user's channels is shown as well; other
runners of the same user change that one). Then the runner is stopped with SIGTERM, /dev/shm
is checked for leftovers of the channel, and ``episodic info`` on the log is timed in a
subprocess, interpreter start included, as a user would run it.

Its resident memory is also read every SLOPE_EVERY episodes from episode 1,000 on, and the
least-squares slope of those readings is printed in bytes per episode (the growth a longer soak
would show, warm-up left out).

Goals: RSS growth from episode 1,000 to the last under 5 %; the same fds and channel entries at
both samples; nothing of the channel left in /dev/shm after the stop; info under a second.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import numpy as np

from episodic.bridge import Client
from episodic.bridge.channel import SHM_DIR, object_names, object_paths
from episodic.bridge.client import ProtocolError
from episodic.interface.trajectory import min_jerk
from episodic.interface.vocabulary import Flag, Reply
from episodic.tools.served import ServedRunner, ServeError, fresh_channel
from process import rss_kib

SEGMENT_SAMPLES = 50   # samples of each episode's one segment
EVERY = 100            # episodes between log fetches and rounds of bad commands
SAMPLE_FROM = 1000     # episode of the first sample
SLOPE_EVERY = 250      # episodes between the readings of the RSS slope
TARGET = np.array([0.6, 0.1, 1.5])  # reach target around which contexts are drawn, m
GROWTH_GOAL = 5.0      # % RSS growth
INFO_GOAL = 1.0        # s for `episodic info`



def open_fds(pid: int, log: Path) -> int:
    """How many file descriptors process ``pid`` has open, those on ``log`` counted once (the
    writer opens the log anew for each write and closes it after: a sample taken meanwhile would
    count one more)."""
    fds = f"/proc/{pid}/fd"
    targets = []
    for fd in os.listdir(fds):
        try:
            targets.append(os.readlink(f"{fds}/{fd}"))
        except FileNotFoundError:  # closed meanwhile
            continue
    on_log = str(log.resolve())
    return sum(target != on_log for target in targets) + (on_log in targets)


def shm_entries(channel: str | None = None) -> int:
    """Entries of /dev/shm belonging to ``channel`` (its memory, its semaphores and anything named
    after it), or to any of this user's channels when None."""
    prefix = object_names(channel)["shm"][1:] + "." if channel else f"episodic.{os.getuid()}."
    names = [name.removeprefix("sem.") for name in os.listdir(SHM_DIR)]
    return sum(1 for name in names if (name + ".").startswith(prefix))


class Tally:
    """Commands sent, flags received, and replies that differ from what was expected."""

    def __init__(self):
        self.commands = 0
        self.flags: Counter[Flag] = Counter()
        self.surprises: list[str] = []

    def check(self, reply: Reply, expected: Flag, what: str) -> Reply:
        self.commands += 1
        self.flags[reply.flag] += 1
        if reply.flag != expected:
            self.surprises.append(f"{what}: {reply.flag.name} ({reply.message}), expected {expected.name}")
        return reply

    @property
    def refusals(self) -> int:
        return sum(n for flag, n in self.flags.items() if flag != Flag.OK)


def bad_commands(client: Client, tally: Tally) -> None:
    """Three commands the runner must refuse, sent while no episode runs; the segments hold the
    posture the last reply named, so only the missing start or the NaN is wrong with them."""
    q = np.tile(client.last_reply.posture, (SEGMENT_SAMPLES, 1))
    tally.check(client.send_trajectory(q, index=1, max_commands=1), Flag.OUT_OF_ORDER, "segment before a start")
    nan = q.copy()
    nan[SEGMENT_SAMPLES // 2, 0] = np.nan
    tally.check(client.send_trajectory(nan, index=1, max_commands=1), Flag.INVALID_PAYLOAD, "NaN segment")
    tally.check(client.start_episode(1, context=[np.nan, *TARGET[1:]]), Flag.INVALID_PAYLOAD, "NaN context")


def soak(runner: ServedRunner, log: Path, episodes: int, seed: int) -> tuple[Tally, float, dict[int, tuple[int, ...]],
                                                                 dict[int, int]]:
    """Run the episodes; the tally, the wall time s, per sampled episode the runner's RSS KiB
    and fds and the /dev/shm entries of its channel and of all of this user's channels, and the
    runner's RSS KiB every SLOPE_EVERY episodes from SAMPLE_FROM on."""
    rng = np.random.default_rng(seed)
    tally = Tally()
    samples, readings = {}, {}
    pid = runner.proc.pid
    with Client(runner.channel, timeout=30) as client:
        dt = 1 / client.control_rate
        t0 = time.perf_counter()
        for episode in range(1, episodes + 1):
            if episode % EVERY == 0:
                bad_commands(client, tally)
            context = TARGET + rng.uniform(-0.1, 0.1, size=3)
            start = tally.check(client.start_episode(1, context=context), Flag.OK, f"start of episode {episode}")
            goal = start.posture + rng.normal(0.0, 0.05, size=client.n_dofs)
            move = min_jerk(start.posture, goal, duration=SEGMENT_SAMPLES * dt, dt=dt)
            tally.check(client.send_trajectory(move.q, qd=move.qd, qdd=move.qdd), Flag.OK,
                        f"segment of episode {episode}")
            if episode % EVERY == 0:
                client.get_episode()
            if episode in (SAMPLE_FROM, episodes):
                samples[episode] = (rss_kib(pid), open_fds(pid, log), shm_entries(runner.channel), shm_entries())
            if episode >= SAMPLE_FROM and (episode - SAMPLE_FROM) % SLOPE_EVERY == 0:
                readings[episode] = rss_kib(pid)
        seconds = time.perf_counter() - t0
    return tally, seconds, samples, readings


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--episodes", type=int, default=10_000, help=f"episodes to run (> {SAMPLE_FROM})")
    parser.add_argument("--seed", type=int, default=0, help="seed of the contexts and the moves")
    args = parser.parse_args()
    if args.episodes <= SAMPLE_FROM:
        parser.error(f"--episodes must exceed {SAMPLE_FROM}")

    with tempfile.TemporaryDirectory() as tmp:
        log = Path(tmp) / "soak.h5"
        channel = fresh_channel("soak")
        try:
            with ServedRunner(channel, task="reach", log=log, seed=0) as runner:
                try:
                    tally, seconds, samples, readings = soak(runner, log, args.episodes, args.seed)
                except (OSError, ProtocolError) as exc:  # the runner died or stopped answering
                    raise runner.failed(f"the soak stopped: {type(exc).__name__}: {exc}") from None
                code = runner.stop()
                leftovers = sorted(path for path in object_paths(channel).values() if os.path.exists(path))
                if code != 0:
                    print(f"the runner exited with code {code}; its stderr:\n{runner.stderr_text().strip()}")
        except ServeError as exc:
            sys.exit(f"runner failed: {exc}")

        t0 = time.perf_counter()
        info = subprocess.run([sys.executable, "-m", "episodic", "info", str(log)], capture_output=True, text=True,
                              check=False)
        info_s = time.perf_counter() - t0
        log_mib = log.stat().st_size / 2**20

    (rss0, fds0, shm0, users0), (rss1, fds1, shm1, users1) = samples[SAMPLE_FROM], samples[args.episodes]
    growth = 100 * (rss1 - rss0) / rss0
    slope = np.polyfit(list(readings), list(readings.values()), 1)[0] * 1024 if len(readings) > 1 else 0.0
    flags = ", ".join(f"{flag.name} {n:,}" for flag, n in sorted(tally.flags.items()))
    print(f"episodes:   {args.episodes:,} in {seconds:.1f} s ({args.episodes / seconds:.0f} episodes/s)")
    print(f"commands:   {tally.commands:,} sent, {tally.refusals:,} refused ({flags})")
    for surprise in tally.surprises[:10]:
        print(f"  unexpected: {surprise}")
    if len(tally.surprises) > 10:
        print(f"  ... {len(tally.surprises) - 10:,} more unexpected replies")
    print(f"runner RSS: {rss0 / 1024:.1f} MiB at episode {SAMPLE_FROM:,}, {rss1 / 1024:.1f} MiB at "
          f"{args.episodes:,}: {growth:+.2f} %; slope {slope:.0f} B per episode ({len(readings)} readings)")
    print(f"runner fds: {fds0} at episode {SAMPLE_FROM:,}, {fds1} at {args.episodes:,}")
    print(f"/dev/shm:   {shm0} entries of the channel at episode {SAMPLE_FROM:,}, {shm1} at {args.episodes:,} "
          f"(all of this user's channels: {users0}, {users1})")
    print(f"after stop: runner exit code {code}, {len(leftovers)} leftover shm objects of the channel"
          + "".join(f"\n  {path}" for path in leftovers))
    if info.returncode == 0:
        print(f"episodic info on the {log_mib:.0f} MiB log: {info_s:.2f} s ({len(info.stdout.splitlines()):,} lines)")
    else:
        print(f"episodic info on the {log_mib:.0f} MiB log failed (exit {info.returncode}) after {info_s:.2f} s:\n"
              f"{info.stderr.strip()}")

    goals = {f"RSS growth < {GROWTH_GOAL:g} %": growth < GROWTH_GOAL,
             "fds equal": fds0 == fds1,
             "channel entries equal": shm0 == shm1,
             "runner exit 0": code == 0,
             "no leftovers": not leftovers,
             f"info < {INFO_GOAL:g} s": info.returncode == 0 and info_s < INFO_GOAL,
             "replies as expected": not tally.surprises}
    missed = [goal for goal, met in goals.items() if not met]
    outcome = '; '.join(missed) + ' missed' if missed else ', '.join(goals)
    print(f"verdict:    {'PASS' if not missed else 'FAIL'} ({outcome})")


if __name__ == "__main__":
    main()
