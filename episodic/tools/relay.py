"""A fault-injecting UDP relay between a runner and a robot (tests and benchmarks/network.py put
it where a lab's network would be; the test machines' kernel has no netem).

    python -m episodic.tools.relay --to 127.0.0.1:7700 [--port 0] [--delay 0.005] [--jitter 0.001]
        [--loss 0.01] [--reorder 0.05] [--drop-for 0.2] [--seed 0]

The runner sends to the relay's port; the relay forwards each datagram to ``--to`` and the
robot's answers back to whoever sent last. Both directions suffer the same faults, each
datagram independently: it is lost with probability ``loss``; otherwise it leaves after
``delay`` s plus a uniform jitter in [-jitter, +jitter] s (never before it came), and with
probability ``reorder`` REORDER_DELAY s later still, so the datagrams after it overtake it.
SIGUSR1, or the line "drop" on its standard input, takes the link down for ``drop_for`` s (every
datagram in that time is lost); a JSON object on its standard input (e.g. {"delay": 0.02}) sets
the faults anew (the ones it leaves out at 0, drop_for at its default). The first line printed says where it listens; on
SIGTERM, SIGINT or the end of its input it prints what it did, as JSON.
"""
from __future__ import annotations

import argparse
import contextlib
import heapq
import json
import selectors
import signal
import socket
import sys
import time
from dataclasses import asdict, dataclass
from typing import TextIO

import numpy as np

from episodic.runtime.scheduling import REALTIME_PRIORITY, SchedulingError, set_realtime

REORDER_DELAY = 0.003  # s added to a datagram picked for reordering (1.5 control periods of the WAM at 500 Hz)


@dataclass(frozen=True)
class Faults:
    """What the link does to each datagram (module docstring); seconds and probabilities."""

    delay: float = 0.0
    jitter: float = 0.0
    loss: float = 0.0
    reorder: float = 0.0
    drop_for: float = 0.2


@dataclass
class RelayCounts:
    """Datagrams forwarded, lost (at random or while the link was down) and sent out of order."""

    forwarded: int = 0
    lost: int = 0
    dropped: int = 0
    reordered: int = 0


class Relay:
    """The relay between a runner (on ``port``) and the robot at ``to``."""

    def __init__(self, to: tuple[str, int], faults: Faults, port: int = 0, seed: int = 0):
        self.to, self.faults = to, faults
        self.rng = np.random.default_rng(seed)
        self.front = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)  # the runner's side
        self.front.bind(("127.0.0.1", port))
        self.back = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)   # the robot's side
        self.back.connect(to)
        self.address: tuple[str, int] = self.front.getsockname()
        self.runner: tuple[str, int] | None = None
        self.counts = RelayCounts()
        self._queue: list[tuple[float, int, bytes, bool]] = []  # (due s, order, datagram, to the robot)
        self._order = 0
        self._down_until = -1.0
        self._running = True

    def drop(self, *_: object) -> None:
        """Take the link down for ``faults.drop_for`` s from now (safe from a signal handler)."""
        self._down_until = time.monotonic() + self.faults.drop_for

    def stop(self, *_: object) -> None:
        self._running = False

    def _take(self, data: bytes, to_robot: bool) -> None:
        now, f = time.monotonic(), self.faults
        if now < self._down_until:
            self.counts.dropped += 1
            return
        if self.rng.random() < f.loss:
            self.counts.lost += 1
            return
        due = now + max(f.delay + self.rng.uniform(-f.jitter, f.jitter), 0.0)
        if self.rng.random() < f.reorder:
            due += REORDER_DELAY
            self.counts.reordered += 1
        self._order += 1
        heapq.heappush(self._queue, (due, self._order, data, to_robot))

    def _control(self, control: TextIO | None) -> None:
        """A line of ``control``: "drop", or the faults as a JSON object (module docstring)."""
        assert control is not None
        line = control.readline()
        if not line:
            self._running = False
        elif line.strip() == "drop":
            self.drop()
        elif line.strip():
            self.faults = Faults(**json.loads(line))
            print(f"faults {json.dumps(asdict(self.faults))}", flush=True)

    def run(self, control: TextIO | None = None) -> None:
        """Relay until ``stop()`` (or the end of ``control``, lines that change the faults)."""
        sel = selectors.DefaultSelector()
        sel.register(self.front, selectors.EVENT_READ, False)
        sel.register(self.back, selectors.EVENT_READ, True)
        if control is not None:
            sel.register(control, selectors.EVENT_READ, None)
        while self._running:
            timeout = 0.05 if not self._queue else max(self._queue[0][0] - time.monotonic(), 0.0)
            for key, _ in sel.select(timeout):
                sock = key.fileobj
                if key.data is None:
                    self._control(control)
                    continue
                assert isinstance(sock, socket.socket)
                try:
                    data, sender = sock.recvfrom(65536)
                except OSError:  # the robot is gone (ICMP refused): its datagrams stop
                    continue
                if not key.data:
                    self.runner = sender
                self._take(data, not key.data)
            now = time.monotonic()
            while self._queue and self._queue[0][0] <= now:
                _, _, data, to_robot = heapq.heappop(self._queue)
                try:
                    if to_robot:
                        self.back.send(data)
                    elif self.runner is not None:
                        self.front.sendto(data, self.runner)
                    self.counts.forwarded += 1
                except OSError:
                    self.counts.lost += 1


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--to", required=True, help="the robot's HOST:PORT")
    parser.add_argument("--port", type=int, default=0, help="port the runner sends to (0: any free one)")
    for name in ("delay", "jitter", "loss", "reorder", "drop-for"):
        parser.add_argument(f"--{name}", type=float, default=getattr(Faults(), name.replace("-", "_")))
    parser.add_argument("--seed", type=int, default=0)
    a = parser.parse_args(argv)
    faults = Faults(a.delay, a.jitter, a.loss, a.reorder, a.drop_for)
    with contextlib.suppress(SchedulingError):  # a network is not slowed down by other processes
        set_realtime(REALTIME_PRIORITY)
    host, _, port = a.to.rpartition(":")
    relay = Relay((host, int(port)), faults, a.port, a.seed)
    signal.signal(signal.SIGUSR1, relay.drop)
    signal.signal(signal.SIGTERM, relay.stop)
    signal.signal(signal.SIGINT, relay.stop)
    host, port = relay.address
    print(f"relay: 127.0.0.1:{port} -> {a.to}, {json.dumps(asdict(faults))}", flush=True)
    relay.run(sys.stdin)
    print(json.dumps(asdict(relay.counts)), flush=True)
    sys.exit(0)


if __name__ == "__main__":
    main()
