"""Bridge overhead against the in-process runner, and an empty command against a raw ping-pong.

Measured side by side in one run (medians of repeats); each line prints its ratio to its goal.

1. A 2 s (1000-step) reach segment plus the episode's full per-step log over the bridge (Client
   -> a served runner in another process). The served runner times its own handling of every
   command (``Runner.send``, inside the runner process), so the physics, which alone varies by
   several times the goal from run to run on a shared machine, drops out of each segment's
   overhead: the client's round trip plus its ``get_episode`` minus the runner's own time for
   that very command, minus what an in-process runner's ``get_episode`` takes (the in-process
   learner builds the log's arrays too). The log is fetched as copies (``get_episode()``) and
   as views into the channel's log block (``get_episode(copy=False)``). The difference of the
   two medians (bridge segment, in-process segment) is printed beside it. The goal is against
   the machine's floor for the same bytes, measured in the same run, one transfer after each
   repeat: q written into shared memory, copied out by a bare peer process that writes the
   log's values back, two semaphores, the peer's caches as 2 s of physics leave them (32 MB
   touched before each) and the learner idle as long as that repeat's physics took, as it is
   between its commands. Goal: overhead <= 1.3x the floor (the ratio of the medians; its range
   over five blocks of repeats beside it), PASS or FAIL. A third row, "bare exchange", sends the
   same segment through the same channel and served runner with none of the client's Python: its
   fixed fields packed and q written under the lock, the two semaphores, the reply's fields
   unpacked (no checks, no command or Reply objects, no deadlines); the runner's side is
   unchanged. It shows how much of the overhead is the client's code (no goal).
2. The round trip of an empty command (a reset with no episode running) against a raw
   posix_ipc two-semaphore ping-pong between two processes, with the two processes on
   different cores and on one core. Goal: within 3x of the raw ping-pong on one core (the
   ratio on different cores is printed beside it), PASS or FAIL.
The runner process is pinned to one core and the learner to the other, so both sides of each
comparison run where they would in use.

    python benchmarks/bridge.py [--repeats 200]
"""
from __future__ import annotations

import argparse
import contextlib
import mmap
import os
import signal
import subprocess
import sys
import tempfile
import time

import numpy as np
import posix_ipc

from episodic.bridge import Client
from episodic.bridge.channel import locked
from episodic.bridge.codec import _pack_command
from episodic.bridge.layout import REPLY_STRUCT
from episodic.interface.commands import StartCommand, TrajectoryCommand
from episodic.interface.vocabulary import Kind
from episodic.runtime.runner import Runner
from episodic.tasks import make_task
from episodic.tools.served import fresh_channel
from process import MULTI_CORE, pin

# the runner of ``episodic serve --task reach``, timing its own handling of every command
# (Runner.send) and the endpoint's whole handling of it (Endpoint.serve_one: reading the command,
# running it, the log block and the reply), s in the order the commands came, into the .npz
# file argv[2] when it stops
SERVER = """
import sys, time
import numpy as np
from episodic.bridge.serve import serve
from episodic.runtime.runner import Runner
from episodic.tasks import make_task
runner = Runner(make_task("reach"), keep_episodes=False)  # as `episodic serve` builds it
spent = {"send": [], "serve_one": []}
def timed(function, times):
    def call(*args):
        t0 = time.perf_counter()
        out = function(*args)
        times.append(time.perf_counter() - t0)
        return out
    return call
runner._deliver = timed(runner._deliver, spent["send"])
def ready(endpoint):
    endpoint.serve_one = timed(endpoint.serve_one, spent["serve_one"])
    print("serving", flush=True)
serve(runner, sys.argv[1], ready=ready)
np.savez(sys.argv[2], **spent)
"""
PONG = """
import sys, posix_ipc
ping, pong = posix_ipc.Semaphore(sys.argv[1]), posix_ipc.Semaphore(sys.argv[2])
print("ready", flush=True)
while True:
    ping.acquire()
    pong.release()
"""
# the machine's floor for a segment's bytes: on each ping, copy the command's q (argv[4] float64)
# out of the shared memory argv[3] and write the log (argv[5] float64, after the command) into it,
# from a private array, as a runner does; before each, touch 32 MB, as 2 s of physics leaves the
# caches
TRANSFER = """
import mmap, sys, numpy as np, posix_ipc
ping, pong = posix_ipc.Semaphore(sys.argv[1]), posix_ipc.Semaphore(sys.argv[2])
shm = posix_ipc.SharedMemory(sys.argv[3])
n_command, n_log = int(sys.argv[4]), int(sys.argv[5])
shared = np.ndarray(n_command + n_log, "<f8", buffer=mmap.mmap(shm.fd, shm.size))
log, physics = np.random.rand(n_log), np.zeros(4 << 20)
print("ready", flush=True)
while True:
    physics += 1.0
    log += 0.0
    ping.acquire()
    q = shared[:n_command].copy()
    shared[n_command:] = log
    pong.release()
"""


RUNNER_CORE, LEARNER_CORE = 1, 0
FLOOR_GOAL = 1.3        # a segment's overhead / the floor for its bytes
BLOCKS = 5              # blocks of repeats the overhead's ratio to the floor is also taken over (its range)
ROUND_TRIP_GOAL = 3.0   # empty command round trip / raw ping-pong, on one core


def segment(home: np.ndarray) -> np.ndarray:
    t = np.arange(1, 1001) / 1000
    return home + 0.2 * np.sin(np.pi * t)[:, None] * np.linspace(1.0, 0.3, home.size)


class TimedRunner:
    """The SERVER runner on ``channel`` in a subprocess pinned to ``core``; after the ``with``
    block, ``send`` and ``serve_one`` hold its times (s) for each command it handled, in order."""

    def __init__(self, channel: str, core: int | None):
        self.channel = channel
        self.send = self.serve_one = np.zeros(0)
        self._file = tempfile.NamedTemporaryFile(suffix=".npz", delete=False)
        self._file.close()
        self.proc = subprocess.Popen([sys.executable, "-c", SERVER, channel, self._file.name],
                                     stdout=subprocess.PIPE, text=True,
                                     preexec_fn=None if core is None else lambda: pin(core))

    def __enter__(self) -> TimedRunner:
        if "serving" not in self.proc.stdout.readline():
            self.proc.kill()
            raise RuntimeError("the timed runner did not start")
        return self

    def __exit__(self, *exc) -> None:
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(timeout=60)
        self.proc.stdout.close()
        if self.proc.returncode == 0:
            with np.load(self._file.name) as spent:
                self.send, self.serve_one = spent["send"], spent["serve_one"]
        os.unlink(self._file.name)


# how a segment goes over the bridge, in the order each repeat sends them: the client with the log
# copied (get_episode()), the client with the log as views (get_episode(copy=False)), the bare exchange
VARIANTS = ("log copied", "log as views", "bare exchange")


def bare_segment(client: Client, q: np.ndarray) -> None:
    """Send the segment ``q`` (the next index of the client's episode) through ``client``'s channel
    with as little of Python as the protocol allows: the command block's fixed fields packed and q
    written under the lock, 'command ready' posted, 'reply ready' waited for, the reply's fixed
    fields unpacked under the lock (what a compiled client would do). The client's own
    bookkeeping (its last seq) is kept, so that it goes on as if it had sent the segment."""
    blocks, channel = client._blocks, client._channel
    seq = (client._seq + 1) % 2**64
    fields = dict(kind=int(Kind.TRAJECTORY), episode_id=client.episode_id, index=1, max_commands=1, n_samples=len(q))
    q_block = blocks.command_arrays["q"]
    with locked(channel.lock):
        _pack_command(blocks, fields, seq, os.getpid())  # the codec's packing of the fixed fields
        q_block[:len(q)] = q
    channel.cmd_ready.release()
    channel.reply_ready.acquire()
    with locked(channel.lock):
        reply_seq = REPLY_STRUCT.unpack_from(blocks.buf, blocks.layout.reply_offset)[0]
    client._seq, client._unanswered = seq, False
    if reply_seq != seq:
        raise RuntimeError(f"the bare exchange got the reply to command {reply_seq}, not to {seq}")


class Segments:
    """Per repeat, interleaved: the segment in-process (on the runner's core), then over the
    bridge (learner core) as each of VARIANTS, then one bare transfer of the same bytes (the
    floor). s per segment: ``local_send`` and ``local_log`` (the in-process runner's send and
    get_episode), ``bridge_send[variant]`` and ``bridge_log[variant]`` (the client's send and
    get_episode; none for the bare exchange), ``floor``; ``rows`` of the log. An unmeasured segment
    over the bridge comes first (the served runner's first episode, and the log's size for the
    floor)."""

    def __init__(self, channel: str, repeats: int):
        self.local_send, self.local_log, self.floor = [], [], []
        self.bridge_send = {variant: [] for variant in VARIANTS}
        self.bridge_log = {variant: [] for variant in VARIANTS}
        with contextlib.ExitStack() as stack:
            runner = stack.enter_context(Runner(make_task("reach")))
            client = stack.enter_context(Client(channel, timeout=30))
            q = segment(runner.robot.home)
            pin(LEARNER_CORE)
            client.start_episode(max_commands=1)
            client.send_trajectory(q)
            self.rows = len(client.get_episode(copy=False)["time"])
            self.log_values = self.rows * sum(width for _, width in client.sizes.log_columns)
            transfer = stack.enter_context(raw_transfer(q, self.log_values))
            for episode_id in range(repeats):
                pin(RUNNER_CORE)
                runner.send(StartCommand(episode_id, 1))
                t0 = time.perf_counter()
                runner.send(TrajectoryCommand(episode_id, 1, 1, q))
                t1 = time.perf_counter()
                runner.get_episode()  # the in-process log, as named arrays
                self.local_send.append(t1 - t0)
                self.local_log.append(time.perf_counter() - t1)
                runner.episodes.clear()
                pin(LEARNER_CORE)
                for variant in VARIANTS:
                    client.start_episode(max_commands=1)
                    t0 = time.perf_counter()
                    if variant == "bare exchange":
                        bare_segment(client, q)
                    else:
                        client.send_trajectory(q)
                    t1 = time.perf_counter()
                    if variant != "bare exchange":
                        client.get_episode(copy=variant == "log copied")
                    self.bridge_send[variant].append(t1 - t0)
                    self.bridge_log[variant].append(time.perf_counter() - t1)
                self.floor.append(transfer(self.local_send[-1]))

    def segment_rows(self, variant: str) -> slice:
        """Where the segments sent as ``variant`` are among the served runner's commands, which came
        in the order: the unmeasured start and segment, then for each repeat a start and a segment
        for each of VARIANTS."""
        k, n = VARIANTS.index(variant), len(VARIANTS)
        return slice(3 + 2 * k, 2 + 2 * n * len(self.local_send), 2 * n)

    def overhead(self, variant: str, served: TimedRunner) -> tuple[np.ndarray, np.ndarray]:
        """s per segment that the bridge adds, and the runner's share of it. The overhead: the
        client's send and get_episode minus the served runner's own time for that segment minus
        the in-process get_episode's median; the runner's share: its endpoint's handling of the
        segment minus its own time."""
        rows = self.segment_rows(variant)
        own = served.send[rows]
        overhead = (np.array(self.bridge_send[variant]) + np.array(self.bridge_log[variant]) - own
                    - np.median(self.local_log))
        return overhead, served.serve_one[rows] - own


def empty_commands(channel: str, n: int) -> np.ndarray:
    with Client(channel, timeout=30) as client:
        times = []
        for _ in range(n):
            t0 = time.perf_counter()
            client.reset()
            times.append(time.perf_counter() - t0)
    return np.array(times)


@contextlib.contextmanager
def raw_peer(script: str, *args: str):
    """``script`` in a process on the runner's core with two fresh semaphores, ping and pong, as
    its first arguments and ``args`` after them; yields (ping, pong) once it is ready."""
    names = (f"/episodic-bench-ping-{os.getpid()}", f"/episodic-bench-pong-{os.getpid()}")
    ping, pong = (posix_ipc.Semaphore(name, posix_ipc.O_CREX, mode=0o600) for name in names)
    proc = subprocess.Popen([sys.executable, "-c", script, *names, *args], stdout=subprocess.PIPE, text=True,
                            preexec_fn=lambda: pin(RUNNER_CORE))
    try:
        proc.stdout.readline()
        yield ping, pong
    finally:
        proc.kill()
        proc.wait()
        for sem in (ping, pong):
            sem.unlink()
            sem.close()


def raw_ping_pong(n: int) -> np.ndarray:
    """s per round trip of n bare semaphore ping-pongs."""
    with raw_peer(PONG) as (ping, pong):
        times = []
        for _ in range(n):
            t0 = time.perf_counter()
            ping.release()
            pong.acquire()
            times.append(time.perf_counter() - t0)
        return np.array(times)


@contextlib.contextmanager
def raw_transfer(q: np.ndarray, log_values: int):
    """Bare transfers of a segment's bytes (TRANSFER) with a peer kept running: yields
    ``transfer(think)``, which waits ``think`` s (the time the peer runs its physics meanwhile),
    then writes q into shared memory, where the peer copies it out and writes ``log_values``
    float64 back, and returns the s of that round trip."""
    shm = posix_ipc.SharedMemory(f"/episodic-bench-transfer-{os.getpid()}", posix_ipc.O_CREX, mode=0o600,
                                 size=8 * (q.size + log_values))
    try:
        with mmap.mmap(shm.fd, shm.size) as mm, raw_peer(TRANSFER, shm.name, str(q.size), str(log_values)) as (
                ping, pong):
            command = [np.ndarray(q.size, "<f8", buffer=mm)]  # emptied before the map closes

            def transfer(think: float) -> float:
                time.sleep(think)
                t0 = time.perf_counter()
                command[0][:] = q.ravel()
                ping.release()
                pong.acquire()
                return time.perf_counter() - t0

            try:
                yield transfer
            finally:
                command.clear()
    finally:
        shm.close_fd()
        shm.unlink()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=200)
    args = parser.parse_args()
    channel = fresh_channel("bench")
    n_empty = 5 * args.repeats
    with TimedRunner(channel, RUNNER_CORE if MULTI_CORE else None) as served:
        runs = Segments(channel, args.repeats)
        round_trips = {}
        for placement, core in (("other cores", LEARNER_CORE), ("one core", RUNNER_CORE)):
            pin(core)
            round_trips[placement] = (np.median(raw_ping_pong(n_empty)), np.median(empty_commands(channel, n_empty)))
    ms, us = 1e3, 1e6
    floor = np.median(runs.floor)
    local = np.median(runs.local_send) + np.median(runs.local_log)
    print(f"runner pinned to core {RUNNER_CORE}, learner to core {LEARNER_CORE} ({os.cpu_count()} cores)")
    print(f"2 s segment ({runs.rows} logged steps) + full log, median of {args.repeats} interleaved repeats;")
    print(f"the runner's own time for each segment taken out "
          f"(in-process send {np.median(runs.local_send) * ms:.3f} ms, "
          f"served {np.median(np.r_[tuple(served.send[runs.segment_rows(v)] for v in VARIANTS)]) * ms:.3f} ms; "
          f"in-process get_episode {np.median(runs.local_log) * ms:.3f} ms)")
    print(f"the machine's floor: the same bytes (q in, {runs.log_values} log values out) moved between two processes")
    print(f"  by bare copies and semaphores, the peer's caches as its physics leaves them, one after each repeat: "
          f"{floor * ms:.3f} ms")
    print(f"  {'':16s}{'in-process':>12s}{'bridge':>10s}{'difference':>12s}{'overhead':>10s}{'runner':>9s}"
          f"{'learner':>9s}{'/ floor':>9s}{'range':>13s}   goal <= {FLOOR_GOAL}x the floor")
    for label in VARIANTS:
        bridge = np.median(runs.bridge_send[label]) + np.median(runs.bridge_log[label])
        overheads, runner_sides = runs.overhead(label, served)
        overhead, runner_side = np.median(overheads), np.median(runner_sides)
        blocks = [np.median(o) / np.median(f) for o, f in zip(np.array_split(overheads, BLOCKS),
                                                               np.array_split(np.array(runs.floor), BLOCKS))]
        ratio = overhead / floor
        verdict = "(no goal)" if label == "bare exchange" else "PASS" if ratio <= FLOOR_GOAL else "FAIL"
        print(f"  {label:16s}{local * ms:9.3f} ms{bridge * ms:7.3f} ms{(bridge - local) * ms:9.3f} ms"
              f"{overhead * ms:7.3f} ms{runner_side * ms:6.3f} ms{(overhead - runner_side) * ms:6.3f} ms"
              f"{ratio:8.2f}x{min(blocks):6.2f}-{max(blocks):.2f}x   {verdict}")
    print("  (overhead: the learner's send and get_episode minus the served runner's own time for the segment;")
    print("   runner: the served runner's bridge work, its endpoint's handling of the segment minus its own time;")
    print("   learner: the rest, the client's work and the two wake-ups across processes; range: the ratio over")
    print(f"   {BLOCKS} blocks of consecutive repeats; bare exchange: the segment with none of the client's Python)")
    print(f"empty command round trip, median of {n_empty}")
    print(f"  {'learner and runner on':24s}{'raw ping-pong':>14s}{'bridge':>10s}{'ratio':>8s}"
          f"   goal {ROUND_TRIP_GOAL:.0f}x on one core")
    for placement, (raw, empty) in round_trips.items():
        ratio = empty / raw
        verdict = ("PASS" if ratio <= ROUND_TRIP_GOAL else "FAIL") if placement == "one core" else "(no goal)"
        print(f"  {placement:24s}{raw * us:11.1f} us{empty * us:7.1f} us{ratio:7.2f}x   {verdict}")


if __name__ == "__main__":
    main()
