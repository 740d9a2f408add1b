"""Start and stop real `episodic serve` processes for the bridge tests."""
from __future__ import annotations

import contextlib
import itertools
import os
import subprocess
from pathlib import Path

import numpy as np

from episodic.bridge.blocks import Blocks
from episodic.bridge.channel import Channel
from episodic.served import ServedRunner, fresh_channel

ROOT = Path(__file__).parent.parent
_seq = itertools.count(1_000_000)


def channel_name() -> str:
    """A fresh channel of this test process: test<pid>-<n>."""
    return fresh_channel("test")


def shm_leftovers() -> list[str]:
    """Shared-memory objects (and semaphores) of the channels this test process named."""
    prefix = f"episodic.{os.getuid()}.test{os.getpid()}-"
    return sorted(n for n in os.listdir("/dev/shm") if n.startswith(prefix) or n.startswith("sem." + prefix))


class Served(ServedRunner):
    """`episodic serve --task TASK --channel CHANNEL [--log LOG] ARGS...` in a subprocess, its
    "serving" line already read when constructed (``ready`` says whether it came; a runner that
    failed to start is left for the test to examine, its stderr in ``proc.stderr``)."""

    def __init__(self, channel: str, log: Path | None = None, *args: str, task: str = "reach"):
        super().__init__(channel, task=task, log=log, args=args, stderr=subprocess.PIPE)
        self.read_banner()


def assert_same_steps(expected, other, fetched: dict | None = None) -> None:
    """Every per-step dataset of StoredEpisode ``other`` (and of a client's fetched log, whose
    columns come back as float64) is bit-identical to ``expected``'s."""
    for name, values in expected.steps.items():
        assert other.steps[name].tobytes() == values.tobytes(), name
        if fetched is not None:
            assert fetched[name].astype(values.dtype).reshape(values.shape).tobytes() == values.tobytes(), name


@contextlib.contextmanager
def raw_channel(channel: str):
    """The channel's memory and its block views, attached without a Client (to write raw blocks)."""
    chan = Channel.attach(channel)
    blocks = Blocks(chan.mm, chan.layout)
    try:
        yield chan, blocks
    finally:
        blocks.release()
        chan.mm.close()


def raw_exchange(channel: Channel, blocks: Blocks, seq: int | None = None, timeout: float = 10) -> np.void:
    """Post whatever the command block holds (under a new sequence number unless given) and
    return the reply."""
    seq = next(_seq) if seq is None else seq
    blocks.command["seq"] = seq
    channel.cmd_ready.release()
    channel.reply_ready.acquire(timeout)
    assert int(blocks.reply["seq"]) == seq
    return blocks.reply.copy()
