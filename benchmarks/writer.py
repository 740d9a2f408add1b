"""The log writer against the fastest learner: episodes/s with logging on and off, and what a
SIGKILL loses.

    python benchmarks/writer.py [--episodes 300] [--rounds 5] [--seconds 10]

1. Throughput, in-process: a blocking reach Runner runs ``--episodes`` short episodes (a start and
   one 2-sample segment, the fastest episode a learner can ask for) with no log, then a fresh one
   with a log, ``--rounds`` times alternately; the time includes closing the log (writing all that
   was queued). Printed: episodes/s of each (median and range) and the ratio on/off per round.
2. Loss under SIGKILL, over the bridge: `episodic serve --task reach --log <tmp>` in a subprocess,
   driven by a Client as fast as it goes for ``--seconds`` s, first with single episodes, then
   with back-to-back batches of 256 such episodes (Client.evaluate, protocol v4 batches); the
   runner is then SIGKILLed. Printed: episodes finished (a reply received), episodes on disk
   (whole, under /episodes), episodes lost, and the age at the kill of the oldest one lost.
3. Reading the live log: the same served runner driven with batches for ``--seconds`` s while
   this process reads the log every 0.1 s (episodic.logs.open_log and its /summary, as `episodic
   watch` does). Printed: the reads' wait for the writer (median and max), how often a plain
   h5py.File(path, "r") tried once at the same moments is refused (the writer holds the file),
   and the episodes/s of the learner with and without the reader.
"""
from __future__ import annotations

import argparse
import os
import signal
import statistics
import tempfile
import threading
import time
from pathlib import Path

import h5py
import numpy as np

from episodic.bridge import Client
from episodic.interface.commands import StartCommand, TrajectoryCommand
from episodic.logs import open_log
from episodic.runtime.runner import Runner
from episodic.tasks import make_task
from episodic.tools.served import ServedRunner, fresh_channel

BATCH = 256  # episodes per batch (`episodic serve --max-batch`'s default, the demo's workflow)


def short_episodes(runner_or_client, n: int) -> list[float]:
    """Run n short episodes (start, one 2-sample segment holding the posture); the time.monotonic()
    at which each one's last reply came."""
    posture = runner_or_client.start_episode(1).posture
    runner_or_client.send_trajectory(np.tile(posture, (2, 1)))
    q = np.tile(posture, (2, 1))
    ends = []
    for _ in range(n):
        runner_or_client.start_episode(1)
        runner_or_client.send_trajectory(q)
        ends.append(time.monotonic())
    return ends


def rate(log: Path | None, n: int) -> float:
    """Episodes/s of n short episodes in-process, closing (and so writing) the log included."""
    started = time.perf_counter()
    with Runner(make_task("reach"), log=log, keep_episodes=False) as runner:
        short_episodes(runner, n)
    return n / (time.perf_counter() - started)


def on_disk(log: Path) -> set[int] | str:
    """The numbers of the episodes whole in ``log`` (a row of /episodes each), or why the log
    cannot be read."""
    try:
        with h5py.File(log, "r") as f:
            return set(f["episodes"].fields("number")[()].tolist())
    except (OSError, RuntimeError, KeyError) as exc:
        return f"the log cannot be read ({exc})"


def killed(log: Path, seconds: float, batches: bool) -> tuple[list[float], float]:
    """Serve a blocking reach runner logging to ``log``, drive it for ``seconds`` s as fast as a
    Client goes, SIGKILL it; each finished episode's end (time.monotonic()) in episode-number order,
    and the kill's."""
    ends: list[float] = []
    with ServedRunner(fresh_channel("writer"), task="reach", log=log) as served:
        with Client(served.channel, timeout=60) as client:
            posture = client.start_episode(1).posture
            client.send_trajectory(np.tile(posture, (2, 1)))
            ends.append(time.monotonic())
            stop = time.monotonic() + seconds
            if batches:
                q = np.tile(posture, (2, 1))
                population = [[StartCommand(k, 1), TrajectoryCommand(k, 1, 1, q)] for k in range(BATCH)]
                while time.monotonic() < stop:
                    client.evaluate(population)
                    ends += [time.monotonic()] * BATCH
            else:
                while time.monotonic() < stop:
                    ends += short_episodes(client, 50)
            os.kill(served.proc.pid, signal.SIGKILL)
            kill = time.monotonic()
            served.proc.wait()
    return ends, kill


def loss(log: Path, seconds: float, batches: bool) -> str:
    ends, kill = killed(log, seconds, batches)
    what = f"{'batches of ' + str(BATCH) if batches else 'single episodes'}: {len(ends)} finished"
    written = on_disk(log)
    if isinstance(written, str):
        return f"{what}, {written}"
    lost = sorted(set(range(len(ends))) - written)
    oldest = max((kill - ends[k] for k in lost), default=0.0)
    return (f"{what}, "
            f"{len(ends) - len(lost)} on disk, {len(lost)} lost, the oldest lost finished {oldest * 1e3:.0f} ms "
            f"before the kill")


def batches_per_second(log: Path, seconds: float, read: bool) -> tuple[float, list[float], int]:
    """Serve a blocking reach runner logging to ``log`` and drive it with batches of BATCH short
    episodes for ``seconds`` s; with ``read``, open the log every 0.1 s meanwhile (plain h5py
    once, then open_log). Episodes/s, each open_log's time (s), and the plain opens refused."""
    waits: list[float] = []
    refused = 0
    with ServedRunner(fresh_channel("writer"), task="reach", log=log) as served:
        with Client(served.channel, timeout=60) as client:
            q = np.tile(client.start_episode(1).posture, (2, 1))
            client.send_trajectory(q)
            population = [[StartCommand(k, 1), TrajectoryCommand(k, 1, 1, q)] for k in range(BATCH)]
            done = threading.Event()

            def reader() -> None:
                nonlocal refused
                while not done.wait(0.1):
                    try:
                        h5py.File(log, "r").close()
                    except OSError:  # errno 11 while the writer writes (or the file grew as the open waited)
                        refused += 1
                    started = time.perf_counter()
                    with open_log(log) as f:
                        f["summary"].shape  # noqa: B018 - what a watcher reads
                    waits.append(time.perf_counter() - started)

            thread = threading.Thread(target=reader)
            if read:
                thread.start()
            n, started = 0, time.monotonic()
            while time.monotonic() < started + seconds:
                client.evaluate(population)
                n += BATCH
            rate = n / (time.monotonic() - started)
            done.set()
            if read:
                thread.join()
    return rate, waits, refused


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--seconds", type=float, default=10.0)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        off, on = [], []
        for k in range(args.rounds):
            off.append(rate(None, args.episodes))
            on.append(rate(Path(tmp) / f"rate{k}.h5", args.episodes))
        ratios = [a / b for a, b in zip(on, off)]
        for name, values in (("logging off", off), ("logging on", on)):
            print(f"{name}: {statistics.median(values):.0f} episodes/s (range {min(values):.0f} to {max(values):.0f})")
        print(f"on/off: {statistics.median(ratios):.2f} (range {min(ratios):.2f} to {max(ratios):.2f})")
        print(loss(Path(tmp) / "single.h5", args.seconds, batches=False))
        print(loss(Path(tmp) / "batches.h5", args.seconds, batches=True))
        alone, _, _ = batches_per_second(Path(tmp) / "alone.h5", args.seconds, read=False)
        watched, waits, refused = batches_per_second(Path(tmp) / "watched.h5", args.seconds, read=True)
        print(f"live log read every 0.1 s: open_log waited {statistics.median(waits) * 1e3:.1f} ms median, "
              f"{max(waits) * 1e3:.1f} ms at most ({len(waits)} reads); plain h5py refused {refused} of "
              f"{len(waits)} single tries; learner {watched:.0f} episodes/s read, {alone:.0f} not read")


if __name__ == "__main__":
    main()
