"""A log is readable while `episodic serve --log` writes it (a live log): info, watch, plot,
replay, export, episodic.logs and plain h5py read every episode written before they opened the
file, each whole, while a learner drives the runner (single episodes and batches, blocking and
realtime); a runner SIGKILLed mid-episode leaves every earlier episode readable."""
from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path

import h5py
import numpy as np
import pytest
from click.testing import CliRunner

from episodic.bridge import Client
from episodic.cli.main import main
from episodic.interface.commands import StartCommand, TrajectoryCommand
from episodic.logs import being_written, open_log, read_episodes, read_summary
from episodic.logs.writer import QUEUE_SECONDS
from episodic.tools.replay import replay as run_replay
from tests.helpers import Served, channel_name

pytestmark = pytest.mark.slow

BATCH = 32      # episodes per batch the learner sends
ROUNDS = 2      # times the readers read the live log
KILL_AFTER = 0.5  # s into the last episode (a batch, or a long realtime segment) the runner is killed


def invoke(*args: str):
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


class Learner(threading.Thread):
    """Drives a served runner as fast as it goes, single episodes and batches by turns, until
    stopped; ``ends`` holds the time.monotonic() of each finished episode's last reply, by number."""

    def __init__(self, client: Client, batches: bool):
        super().__init__(daemon=True)
        self.client, self.batches = client, batches
        self.ends: list[float] = []
        self.stop = threading.Event()
        self.failure: BaseException | None = None

    def run(self) -> None:
        try:
            posture = self.client.start_episode(1).posture
            q = np.tile(posture, (20, 1))
            self.client.send_trajectory(q)
            self.ends.append(time.monotonic())
            population = [[StartCommand(k, 1), TrajectoryCommand(k, 1, 1, q)] for k in range(BATCH)]
            while not self.stop.is_set():
                for _ in range(5):
                    self.client.start_episode(1)
                    self.client.send_trajectory(q)
                    self.ends.append(time.monotonic())
                if self.batches:
                    self.client.evaluate(population)
                    self.ends += [time.monotonic()] * BATCH
        except BaseException as exc:  # noqa: BLE001 - reported by the test
            self.failure = exc


def plain_h5py(log: Path) -> set[int]:
    """The episodes under /episodes of ``log`` read with plain h5py (tried again while the writer
    holds the file, as episodic.logs.open_log does), each checked whole and read."""
    deadline = time.monotonic() + 10
    while True:
        try:
            f = h5py.File(log, "r")
            break
        except OSError as exc:  # the writer is writing (errno 11), or the file grew while the open waited
            assert isinstance(exc, BlockingIOError) or "truncated file" in str(exc), exc
            assert time.monotonic() < deadline
            time.sleep(0.005)
    with f:
        numbers = set()
        steps = f["steps"]
        for row in f["episodes"][()]:  # a row per episode written whole, naming its rows of /steps
            assert row["steps_start"] + row["n_steps"] <= len(steps)
            assert len(steps[row["steps_start"] : row["steps_start"] + row["n_steps"]]["q"]) == row["n_steps"]
            numbers.add(int(row["number"]))
    assert list(range(len(numbers))) == sorted(numbers)
    return numbers


def read_live(log: Path, ends: list[float], tmp: Path, k: int, blocking: bool = True) -> None:
    """Every reader on the live log: each sees at least the episodes whose last reply (``ends``)
    came QUEUE_SECONDS before it opened the file (the writer's bound), and reads them whole (a
    blocking run's replay bit-identically; a realtime run's do not replay)."""
    opened = time.monotonic()
    written = sum(1 for end in ends if end < opened - QUEUE_SECONDS)
    seen = plain_h5py(log)
    assert len(seen) >= written
    rows, partial = read_summary(log)
    assert not partial and len(rows) >= written and rows["number"].tolist() == list(range(len(rows)))
    info = invoke("info", str(log))
    assert info.exit_code == 0, info.output
    watched = invoke("watch", str(log), "--once")
    assert watched.exit_code == 0 and "live: a runner is writing it" in watched.output, watched.output
    last = len(rows) - 1
    if blocking:
        replayed = invoke("replay", str(log), "--episode", "0", str(last))
        assert replayed.exit_code == 0 and "2 episodes replayed bit-identically" in replayed.output, replayed.output
    else:
        assert [e.name for e in read_episodes(log, [0, last])] == ["000000", f"{last:06d}"]
    exported = invoke("export", str(log), "--format", "mrdplot", "--out", str(tmp / f"mrd{k}"),
                      "--episode", f"{max(last - 2, 0)}-{last}")
    assert exported.exit_code == 0 and "wrote 3 MRDPLOT files" in exported.output, exported.output
    if k == 0:  # matplotlib once
        plotted = invoke("plot", str(log), "--out", str(tmp / "curve.png"))
        assert plotted.exit_code == 0 and (tmp / "curve.png").stat().st_size > 0, plotted.output


def killed_mid_episode(served: Served, log: Path, ends: list[float], started: float, blocking: bool = True) -> None:
    """SIGKILL ``served`` KILL_AFTER s after ``started`` (its running episode's start); then every
    episode finished QUEUE_SECONDS before that start is in the log, whole, and replays."""
    time.sleep(max(started + KILL_AFTER - time.monotonic(), 0))
    os.kill(served.proc.pid, signal.SIGKILL)
    served.proc.wait()
    assert not being_written(log)
    earlier = sum(1 for end in ends if end < started - QUEUE_SECONDS)
    seen = plain_h5py(log)
    assert len(seen) >= earlier > 0
    episodes = read_episodes(log)
    assert [int(e.name) for e in episodes] == sorted(seen)
    if blocking:
        report = run_replay(log, [0, len(seen) - 1])
        assert report.identical, report.differences
    assert invoke("info", str(log)).exit_code == 0


def test_a_blocking_runners_log_reads_while_it_runs_and_after_a_kill(tmp_path):
    log = tmp_path / "live.h5"
    with Served(channel_name(), log) as served, Client(served.channel, timeout=60) as client:
        learner = Learner(client, batches=True)
        learner.start()
        try:
            for k in range(ROUNDS):
                while len(learner.ends) < (k + 1) * (BATCH + 10) and learner.failure is None:
                    time.sleep(0.05)
                assert being_written(log)
                read_live(log, list(learner.ends), tmp_path, k)
        finally:
            learner.stop.set()
            learner.join(60)
        assert learner.failure is None, learner.failure
        # the last: a population of long episodes, killed in the middle of one
        q = np.tile(client.start_episode(1).posture, (2000, 1))
        client.send_trajectory(q[:2])
        ends = [*learner.ends, time.monotonic()]
        started = time.monotonic()
        population = [[StartCommand(k, 1), TrajectoryCommand(k, 1, 1, q)] for k in range(64)]
        threading.Thread(target=lambda: _quietly(client.evaluate, population), daemon=True).start()
        killed_mid_episode(served, log, ends, started)


def test_a_realtime_runners_log_reads_while_it_runs_and_after_a_kill(tmp_path):
    log = tmp_path / "live.h5"
    with Served(channel_name(), log, "--mode", "realtime") as served, Client(served.channel, timeout=60) as client:
        posture = client.start_episode(1).posture
        q = np.tile(posture, (50, 1))
        client.send_trajectory(q)
        ends = [time.monotonic()]
        for k in range(3):
            for _ in range(4):
                client.start_episode(1)
                client.send_trajectory(q)
                ends.append(time.monotonic())
            read_live(log, ends, tmp_path, k, blocking=False)
        client.start_episode(1)
        started = time.monotonic()  # a 4 s segment, killed in the middle
        threading.Thread(target=lambda: _quietly(client.send_trajectory, np.tile(posture, (2000, 1))),
                         daemon=True).start()
        killed_mid_episode(served, log, ends, started, blocking=False)


def test_open_log_waits_for_the_writer_and_a_reader_holding_the_file_holds_the_writer(tmp_path):
    log = tmp_path / "held.h5"
    with Served(channel_name(), log) as served, Client(served.channel, timeout=60) as client:
        q = np.tile(client.start_episode(1).posture, (20, 1))
        client.send_trajectory(q)
        written(log, 1)
        with open_log(log) as f:  # a reader holding the file: the next episode waits in the queue
            client.send(StartCommand(2, 1))
            client.send_trajectory(q)
            time.sleep(0.3)
            assert f["episodes"].fields("number")[()].tolist() == [0]
        written(log, 2)
        served.stop(check=True)
    assert not being_written(log)
    assert [e.attrs["episode_id"] for e in read_episodes(log)][1:] == [2]


def written(log: Path, n: int) -> None:
    """Wait (at most 5 s) until the log holds ``n`` episodes."""
    deadline = time.monotonic() + 5
    while len(read_summary(log)[0]) < n:
        assert time.monotonic() < deadline
        time.sleep(0.02)


def _quietly(call, *args) -> None:
    """``call(*args)``, whatever it raises (the runner it talks to is killed meanwhile)."""
    try:
        call(*args)
    except BaseException:  # noqa: BLE001, S110 - the runner is killed under it
        pass


def test_a_writer_and_a_reader_in_one_process_take_turns(tmp_path):
    """HDF5 locks a log against other processes only (a reader in the writer's process would share
    its open file, and reading it while the writer thread changes or closes it can crash): in one
    process a reader waits while the writer has the log open, and the writer while a reader has."""
    from episodic.logs.writer import RunLog

    log = RunLog(tmp_path / "turns.h5", {}, "ticks")
    try:
        assert log._open(wait=False)  # the writer has it open
        with pytest.raises(BlockingIOError):
            open_log(log.path, wait=0.05)
        log._close_file()
        with open_log(log.path, wait=0.05) as f:  # a reader has it open
            assert "episodes" in f
            assert not log._open(wait=False)
        assert log._open(wait=False)
        log._close_file()
    finally:
        log.close()
