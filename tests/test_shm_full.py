"""A full /dev/shm never kills a runner: its channel's memory is reserved when the channel is
created (so writes into it cannot meet a full /dev/shm later, which was a SIGBUS), and a
/dev/shm without room for a channel is a one-line message with nothing left behind.

The machine's own /dev/shm is never filled: each case runs in a user and mount namespace
(``unshare -rm``) with a small private tmpfs mounted on /dev/shm, real `episodic serve`
processes, real clients and real files filling it."""
from __future__ import annotations

import json
import shutil
import subprocess
import sys

import pytest

from tests.helpers import ROOT

pytestmark = pytest.mark.slow  # real `episodic serve` processes in a namespace

# Runs as root of a private user and mount namespace: mounts a 64 MiB tmpfs on /dev/shm, then
# (1) serves, fills /dev/shm to the last byte and runs an episode that writes the log block's
# pages and a batch that writes the batch block's; (2) leaves room for the memory object and one
# semaphore only; (3) leaves less room than the memory object needs. Prints one JSON line.
INSIDE = r"""
import json, os, subprocess, sys
import numpy as np
from episodic.bridge import Client
from episodic.interface.commands import StartCommand, TrajectoryCommand
from episodic.tools.served import ServedRunner
from tests.helpers import wave

subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64m", "tmpfs", "/dev/shm"], check=True)
SMALL = ("--max-log-steps", "6000", "--max-batch-values", "200000", "--quiet")
out = {}

def fill(leave: int) -> None:
    # one file takes /dev/shm's free space but ``leave`` bytes (rounded to pages by tmpfs)
    stat = os.statvfs("/dev/shm")
    size = stat.f_bavail * stat.f_frsize - leave
    with open("/dev/shm/filler", "ab") as f:
        try:
            os.posix_fallocate(f.fileno(), os.fstat(f.fileno()).st_size, size) if size > 0 else None
            f.write(b"\0" * 4096 * 64)  # whatever is left, to the last byte
            f.flush()
        except OSError:
            pass

def serve_alone(channel):
    proc = subprocess.run([sys.executable, "-m", "episodic", "serve", "--channel", channel, *SMALL],
                          capture_output=True, text=True, timeout=120)
    return {"rc": proc.returncode, "stderr": proc.stderr, "left": sorted(os.listdir("/dev/shm"))}

runner = ServedRunner("full", args=SMALL)
runner.read_banner()
with Client("full", timeout=60) as c:
    total = c._channel.layout.total_size
    fill(0)
    out["free_after_fill"] = os.statvfs("/dev/shm").f_bavail
    start = c.start_episode(max_commands=1)
    reply = c.send_trajectory(wave(start.posture, n=6500, amplitude=0.05))
    out["episode"] = [int(reply.flag), len(c.get_episode()["time"])]
    batch = [[StartCommand(1, 1), TrajectoryCommand(1, 1, 1, wave(start.posture, n=3000, amplitude=0.05))]] * 40
    out["batch"] = [int(r.flag) for r in c.evaluate(batch)]
out["stopped"] = runner.stop()
os.unlink("/dev/shm/filler")

pages = -(-total // 4096) * 4096
fill(pages + 4096)  # the memory object and one semaphore fit, the second semaphore does not
out["no_room_for_semaphores"] = serve_alone("sems")
os.unlink("/dev/shm/filler")
fill(total // 2)
out["no_room"] = serve_alone("small")
os.unlink("/dev/shm/filler")
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def inside():
    """What the script in a private /dev/shm found (skipped where user namespaces are not allowed)."""
    if shutil.which("unshare") is None:
        pytest.skip("needs unshare (util-linux) for a private /dev/shm")
    probe = subprocess.run(["unshare", "-rm", "mount", "-t", "tmpfs", "tmpfs", "/dev/shm"], capture_output=True)
    if probe.returncode != 0:
        pytest.skip(f"no user and mount namespace here for a private /dev/shm: {probe.stderr.decode().strip()}")
    proc = subprocess.run(["unshare", "-rm", sys.executable, "-c", INSIDE], cwd=ROOT, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.splitlines()[-1])


def test_a_runner_serves_on_when_dev_shm_fills_after_it_started(inside):
    assert inside["free_after_fill"] == 0
    assert inside["episode"] == [0, 6000]  # the log block written to its last row (of 6000)
    assert inside["batch"] == [0] * 40
    assert inside["stopped"] == 0  # not -SIGBUS


@pytest.mark.parametrize("case", ["no_room", "no_room_for_semaphores"])
def test_no_room_for_a_channel_is_a_message_and_leaves_nothing(inside, case):
    result = inside[case]
    assert result["rc"] == 1 and "Traceback" not in result["stderr"], result["stderr"]
    assert "of shared memory in /dev/shm" in result["stderr"] and "make room there" in result["stderr"]
    assert "--max-log-steps 6000" in result["stderr"]
    assert result["left"] == ["filler"]
