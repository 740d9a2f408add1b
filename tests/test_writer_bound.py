"""The blocking log writer keeps up or holds the learner back: its queue never holds more than
QUEUE_WRITES writes or QUEUE_BYTES bytes, so a runner SIGKILLed while the fastest learner drives
it (single episodes, and batches of 256) has on disk every episode that finished more than
QUEUE_SECONDS before the kill; a write that fails part-way leaves no half-written episode."""
from __future__ import annotations

import dataclasses
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import h5py
import numpy as np
import pytest

from episodic.bridge import Client
from episodic.bridge.client import BatchError
from episodic.interface.commands import BatchTooLarge, Limits, StartCommand, TrajectoryCommand, most_steps
from episodic.interface.robot import load_robot
from episodic.interface.vocabulary import Flag
from episodic.logs import RunLog, read_episodes
from episodic.logs.writer import QUEUE_BYTES, QUEUE_SECONDS, QUEUE_WRITES
from episodic.runtime.runner import STREAM_BYTES, Runner
from episodic.tasks import make_task
from episodic.tools.batch import evaluate_into
from tests.helpers import Served, channel_name

BATCH = 256      # episodes per batch (serve's default --max-batch, the demo's workflow)
DRIVEN_FOR = 3.0  # s the learner drives the runner before the kill


@pytest.fixture(scope="module")
def finished_episode():
    """A short finished reach episode (a start and one 2-sample segment)."""
    with Runner(make_task("reach"), keep_episodes=True) as runner:
        posture = runner.start_episode(1).posture
        runner.send_trajectory(np.tile(posture, (2, 1)))
    return runner.episodes[0]


def test_the_writer_queue_is_bounded_in_writes_and_bytes(tmp_path, finished_episode):
    log = RunLog(tmp_path / "bounded.h5", {}, "thread")
    per_block = sum(v.nbytes for v in finished_episode.blocks[0].values())
    # 0.6 QUEUE_BYTES of steps each: two never fit in the queue together
    reps = int(0.6 * QUEUE_BYTES / per_block)
    big = dataclasses.replace(finished_episode, blocks=[{k: np.repeat(v, reps, axis=0)
                                                         for k, v in finished_episode.blocks[0].items()}])
    most = 0
    for number in range(40):
        log.write_episode(dataclasses.replace(big if number % 20 >= 18 else finished_episode, number=number))
        most = max(most, len(log._pending))
        assert len(log._pending) <= QUEUE_WRITES
        assert log._queued_bytes <= QUEUE_BYTES or len(log._pending) == 1
    log.close()
    assert most > 1  # the queue was used
    assert [e.name for e in read_episodes(tmp_path / "bounded.h5")] == [f"{k:06d}" for k in range(40)]


@pytest.mark.parametrize("writer", ["inline", "thread"])  # the thread: written together, then one by one
def test_a_write_failing_part_way_leaves_no_half_written_episode(tmp_path, finished_episode, writer):
    # three task-state columns where the run's tables have four: its segments' rows cannot be
    # made, after its initial state and its steps were appended to their tables
    broken = dataclasses.replace(finished_episode, number=1, state_columns=("x", "y", "z"))
    log = RunLog(tmp_path / "failed.h5", {}, writer)
    for ep in (finished_episode, broken, dataclasses.replace(finished_episode, number=2)):
        log.write_episode(ep)
    log.close()
    failures = log.pop_failures()
    assert len(failures) == 1 and "episode 000001" in failures[0]
    with h5py.File(tmp_path / "failed.h5", "r") as f:
        assert f["episodes"].fields("number")[()].tolist() == [0, 2]
        assert f["steps"].shape == (2 * finished_episode.n_steps,) and f["initial_states"].shape[0] == 2  # taken back
        assert list(f["summary"]["number"]) == [0, 2]
    assert [e.name for e in read_episodes(tmp_path / "failed.h5")] == ["000000", "000002"]


def drive_and_kill(log: Path, batches: bool) -> tuple[list[float], float]:
    """Serve a blocking reach runner logging to ``log``, drive it as fast as a Client goes for
    DRIVEN_FOR s (single short episodes, or batches of BATCH of them), SIGKILL it; the
    time.monotonic() each finished episode's reply came, by episode number, and the kill's."""
    with Served(channel_name(), log) as served, Client(served.channel, timeout=60) as client:
        posture = client.start_episode(1).posture
        q = np.tile(posture, (2, 1))
        client.send_trajectory(q)
        ends = [time.monotonic()]
        population = [[StartCommand(k, 1), TrajectoryCommand(k, 1, 1, q)] for k in range(BATCH)]
        stop = time.monotonic() + DRIVEN_FOR
        while time.monotonic() < stop:
            if batches:
                client.evaluate(population)
                ends += [time.monotonic()] * BATCH
            else:
                client.start_episode(1)
                client.send_trajectory(q)
                ends.append(time.monotonic())
        os.kill(served.proc.pid, signal.SIGKILL)
        kill = time.monotonic()
        served.proc.wait()
    return ends, kill


@pytest.mark.slow
@pytest.mark.serial  # the bound is wall-clock time
@pytest.mark.parametrize("batches", [False, True], ids=["single", "batches"])
def test_a_sigkill_loses_no_episode_finished_more_than_the_bound_before(tmp_path, batches):
    ends, kill = drive_and_kill(tmp_path / "killed.h5", batches)
    # a kill while the writer flushed may leave the rows of the write it cut short without their
    # text (tests/test_log.py::test_a_row_a_kill_left_without_its_text_leaves_the_others_readable):
    # those episodes had not been written, and the reader leaves them out
    written = {int(e.name) for e in read_episodes(tmp_path / "killed.h5")}
    with h5py.File(tmp_path / "killed.h5", "r") as f:
        rows = f["episodes"].shape[0]
    lost = set(range(len(ends))) - written
    assert len(ends) > 2 * QUEUE_WRITES  # the learner outran the writer long enough to fill its queue
    assert not {k for k in lost if kill - ends[k] > QUEUE_SECONDS}
    assert len(lost) <= QUEUE_WRITES + 1  # what was queued, and the one being written
    assert len(written) <= rows <= len(written) + QUEUE_WRITES  # at most one write's rows cut short


def episode_contents(path: Path) -> dict[str, object]:
    """Every episode of the log at ``path`` as read (attributes, initial state, steps, segments,
    commands; values as bytes) and /summary, but the wall-clock times (which differ from run to run)."""
    out: dict[str, object] = {}
    for ep in read_episodes(path):
        out.update({f"{ep.name}@{k}": v for k, v in ep.attrs.items() if k != "wall_time"})
        out[f"{ep.name}/initial_state"] = ep.initial_state.tobytes()
        for part in ("steps", "segments"):
            out.update({f"{ep.name}/{part}/{k}": (v.dtype.str, v.shape, v.tobytes())
                        for k, v in getattr(ep, part).items()})
        out[f"{ep.name}/commands"] = [(attrs, {k: v.tobytes() for k, v in arrays.items()})
                                      for attrs, arrays in ep.commands]
    with h5py.File(path, "r") as f:
        summary = f["summary"][()]
        out["summary"] = {k: summary[k].tobytes() for k in summary.dtype.names if k != "wall_time"}
        out["roots"] = sorted(f)
    return out


@pytest.mark.slow  # about 20,000 simulated steps, twice
def test_a_long_episode_streams_its_steps_to_the_log_with_the_same_contents(tmp_path):
    n_samples = 6_000  # a segment's steps: about 4.5 MB held, past STREAM_BYTES after each segment
    logs, episodes, held = {}, {}, []
    for name, keep in (("streamed", False), ("whole", True)):
        with Runner(make_task("reach"), log=tmp_path / f"{name}.h5", keep_episodes=keep) as runner:
            posture = runner.start_episode(1).posture
            runner.send_trajectory(np.tile(posture, (2, 1)))
            runner.start_episode(3)
            for _ in range(3):
                runner.send_trajectory(np.tile(posture, (n_samples, 1)))
                held.append(runner.machine.last_episode.held_bytes)
            episodes[name] = runner.get_episode()
            assert bool(runner.machine.last_episode.streamed_blocks) == (name == "streamed")
        logs[name] = episode_contents(tmp_path / f"{name}.h5")
    assert max(held[:3]) < STREAM_BYTES + 2 * n_samples * 800  # never more than that and a segment's
    assert logs["streamed"] == logs["whole"]  # the same log, values and attributes
    assert episodes["streamed"].keys() == episodes["whole"].keys()
    for name, values in episodes["whole"].items():
        np.testing.assert_array_equal(episodes["streamed"][name], values, err_msg=name)
    with h5py.File(tmp_path / "streamed.h5", "r") as f:  # the streamed steps right after the first episode's
        assert f["episodes"][1]["steps_start"] == f["episodes"][0]["n_steps"] == 2
        assert f["steps"].shape == (2 + f["episodes"][1]["n_steps"],)  # no rows left over
    assert [e.name for e in read_episodes(tmp_path / "streamed.h5")] == ["000000", "000001"]


@pytest.mark.slow  # 480,000 simulated steps in a subprocess, 7 to 20 s
def test_the_worst_long_episode_holds_a_bounded_memory():
    # 16 one-sample segments held max_wait_time each: about 370 MB if held until the episode
    # ends (benchmarks/memory.py --held-whole); streamed, the runner holds STREAM_BYTES, one
    # command's steps and the writer's queue (about 150 MiB at its peak, however many segments)
    done = subprocess.run([sys.executable, str(Path(__file__).parents[1] / "benchmarks" / "memory.py"),
                           "--segments", "16"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    grew = float(re.search(r"peak RSS grew (\d+) MiB", done.stdout).group(1))
    assert int(re.search(r"(\d+) steps", done.stdout).group(1)) > 16 * 30_000 and grew < 250, done.stdout


def worst_batch(n_episodes: int, q: np.ndarray) -> list[list]:
    """``n_episodes`` episodes of 8 one-sample segments each held max_wait_time (60 s): inside
    every limit of a single command, 15.4 million steps in all for 64 episodes (about 12 GB)."""
    return [[StartCommand(k, 8), *(TrajectoryCommand(k, i, 8, q, wait_time=60.0) for i in range(1, 9))]
            for k in range(n_episodes)]


def test_a_batch_that_could_hold_more_steps_than_its_limit_is_refused_before_it_runs():
    q = np.zeros((1, 7))
    with Runner(make_task("reach")) as runner:
        with pytest.raises(BatchTooLarge, match=r"64 episodes could run 15361024 control steps together \(30722 s at "
                                                r"500 Hz\), over the limit of 1000000 .* smaller batches"):
            evaluate_into(runner, worst_batch(64, q))
        assert runner.episodes_started == 0 and runner.batches == 0
    # what a batch may run is counted from its commands as the runner runs them: at the limit, it runs
    task = make_task("reach")
    posture = task.start_posture(load_robot("wam"))
    episode = [StartCommand(1, 2), TrajectoryCommand(1, 1, 2, np.tile(posture, (100, 1)), wait_time=0.1),
               TrajectoryCommand(1, 2, 2, np.tile(posture, (20, 1)), rate=100.0)]
    most = most_steps(episode, 500.0, Limits())
    with Runner(task, limits=Limits(max_batch_steps=2 * most)) as runner:
        (result,) = evaluate_into(runner, [episode])
        assert result.n_steps <= most < result.n_steps + 10  # an upper bound, a sample interval at most over
        evaluate_into(runner, [episode, episode])
        with pytest.raises(BatchTooLarge):
            evaluate_into(runner, [episode] * 3)


@pytest.mark.slow  # an `episodic serve` process
def test_episodic_serve_answers_such_a_batch_with_invalid_payload_and_serves_on():
    with Served(channel_name()) as served, Client(served.channel, timeout=60) as client:
        q = client.start_episode(1).posture[None, :]
        with pytest.raises(BatchError, match="refused a batch of 64 episodes: the batch's 64 episodes could run"):
            client.evaluate(worst_batch(64, q))
        (result,) = client.evaluate([[StartCommand(1, 1), TrajectoryCommand(1, 1, 1, np.tile(q, (10, 1)))]])
        assert result.flag == Flag.OK
