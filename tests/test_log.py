"""HDF5 run logs and replay, with real files and a real killed process."""
from __future__ import annotations

import gc
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import h5py
import numpy as np
import pytest

from episodic.interface.columns import STEP_DTYPES
from episodic.interface.commands import StartCommand, TrajectoryCommand
from episodic.logs import LogError, RunLog, partial_episodes, read_episodes, read_metadata, read_summary
from episodic.logs.layout import EPISODE_DTYPE, FORMAT, SUMMARY_DTYPE
from episodic.runtime.machine import Flag
from episodic.runtime.runner import Runner
from episodic.tasks import make_task
from episodic.tools.replay import replay
from tests.helpers import run_episode, wave


@pytest.fixture
def reach_log(tmp_path) -> Path:
    path = tmp_path / "run.h5"
    with Runner(make_task("reach"), log=path, seed=3) as r:
        run_episode(r, 1)
        r.send(TrajectoryCommand(5, 9, 9, wave(r.robot.home)))  # refused: no episode
        run_episode(r, 2, context=(0.6, -0.1, 1.4))
    return path


def test_layout_and_metadata(reach_log):
    meta = read_metadata(reach_log)
    assert meta["task"] == "reach" and meta["robot"] == "wam" and meta["seed"] == 3
    assert meta["mode"] == "blocking" and meta["control_rate"] == 500.0
    assert {"mujoco", "numpy", "h5py", "python", "episodic"} <= set(meta["versions"])
    assert meta["n_episodes"] == 2
    with h5py.File(reach_log) as f:
        assert b"<mujoco" in f["model_xml"][()][:200]
        assert f["rejected"][()].tolist() == [[5, 9, Flag.OUT_OF_ORDER]]
        assert f.attrs["format"] == FORMAT == "episodic-log/2"
        index = f["episodes"][()]  # a row per episode, naming its rows in the run-wide tables
        assert index.dtype == EPISODE_DTYPE and index["number"].tolist() == [0, 1]
        first, second = index
        n = first["n_steps"]
        attrs = json.loads(first["attrs"])
        assert attrs["n_steps"] == n and attrs["episode_id"] == 1
        steps = f["steps"]
        assert set(steps.dtype.names) == set(STEP_DTYPES) and steps.maxshape == (None,) and steps.chunks
        for name in ("q", "qd", "qdd", "q_d", "qd_d", "qdd_d", "u", "u_ff"):
            assert steps.dtype[name].shape == (7,) and steps.dtype[name].base == np.dtype(STEP_DTYPES[name])
        assert steps.dtype["ee_pos"].shape == (3,) and steps.dtype["ee_quat"].shape == (4,)
        assert list(steps.attrs["columns"]) == ["target_x", "target_y", "target_z", "distance"]
        assert (first["steps_start"], second["steps_start"]) == (0, n) and steps.shape == (2 * n,)
        assert first["n_segments"] == 3 and f["segments"].dtype["state"].shape == (4,)
        rewards = f["segments"][first["segments_start"] : first["segments_start"] + 3]["reward"]
        assert attrs["return"] == pytest.approx(rewards.sum())
        assert first["n_commands"] == 4 and f["commands"].shape == (8,)
        start = json.loads(f["commands"][1])  # the first trajectory: its q in /command_values
        offset, shape = start["arrays"]["q"]
        assert start["attrs"]["kind"] == 1 and shape == [500, 7] and f["command_values"].ndim == 1
        assert f["initial_states"].shape[0] == 2 and first["initial_state"] == 0
        assert json.loads(f.attrs["task_params"])["tolerance"] == 0.02


def test_replay_is_bit_identical(reach_log):
    report = replay(reach_log)
    assert report.identical, report.differences
    assert report.episodes == ["000000", "000001"]
    assert replay(reach_log, [1]).identical


def test_replay_reports_a_changed_command(reach_log):
    with h5py.File(reach_log, "a") as f:  # episode 1's second trajectory, q[100, 1]
        offset, shape = json.loads(f["commands"][f["episodes"][1]["commands_start"] + 2])["arrays"]["q"]
        f["command_values"][offset + 100 * shape[1] + 1] += 1e-6
    assert replay(reach_log, [0]).identical
    report = replay(reach_log, [1])
    assert not report.identical
    names = {d.what for d in report.differences}
    assert "steps/q" in names and "steps/q_d" in names
    q_diff = next(d for d in report.differences if d.what == "steps/q_d")
    assert "first at row" in q_diff.detail


def test_stored_episode_matches_replies(tmp_path):
    path = tmp_path / "r.h5"
    with Runner(make_task("reach"), log=path) as r:
        replies = run_episode(r, 4)
    (ep,) = read_episodes(path)
    np.testing.assert_array_equal(ep.segments["reward"], [x.reward for x in replies[1:]])
    np.testing.assert_array_equal(ep.segments["state"][-1], replies[-1].state)
    assert ep.attrs["episode_id"] == 4 and ep.attrs["flag_name"] == "OK"


def test_a_learner_reusing_its_arrays_leaves_the_commands_as_sent(tmp_path):
    """A learner that fills one buffer in place for every segment (and sends a list once):
    the episodes are logged after their replies, yet each command is logged as it was sent,
    so the log replays bit-identically."""
    path = tmp_path / "reuse.h5"
    with Runner(make_task("reach"), log=path) as r:
        buffer = wave(r.robot.home)
        sent = []
        for episode_id in (1, 2):
            r.send(StartCommand(episode_id, 2))
            for k in (1, 2):
                buffer[:] = wave(r.robot.home, amplitude=0.05 * (2 * episode_id + k))
                sent.append(buffer.copy())
                q = buffer.tolist() if k == 2 else buffer
                assert r.send(TrajectoryCommand(episode_id, k, 2, q)).flag == Flag.OK
                buffer[:] = 0.0  # reused (here: scribbled over) as soon as the reply is back
                if isinstance(q, list):
                    q[0][0] = 99.0
    logged = [arrays["q"] for e in read_episodes(path) for _, arrays in e.commands[1:]]
    assert all(np.array_equal(a, b) for a, b in zip(logged, sent, strict=True))
    assert replay(path).identical


def test_arrays_nothing_can_change_are_kept_without_a_copy():
    """The episode's record copies what a learner could change after the reply and keeps as they
    are the arrays over immutable memory (what the bridge decodes), which no one can change."""
    with Runner(make_task("reach")) as r:
        r.send(StartCommand(1, 2))
        q = wave(r.robot.home)
        frozen = np.frombuffer(q.tobytes()).reshape(q.shape)
        assert r.send(TrajectoryCommand(1, 1, 2, frozen)).flag == Flag.OK
        assert r.send(TrajectoryCommand(1, 2, 2, q)).flag == Flag.OK
        kept = [c.q for c in r.episodes[-1].commands[1:]]
    assert kept[0] is frozen
    assert kept[1] is not q and np.array_equal(kept[1], q)


def test_closing_mid_episode_keeps_its_steps(tmp_path):
    path = tmp_path / "r.h5"
    with Runner(make_task("reach"), log=path) as r:
        r.send(StartCommand(1, 3))
        r.send(TrajectoryCommand(1, 1, 3, wave(r.robot.home)))
    (ep,) = read_episodes(path)
    assert ep.attrs["flag"] == Flag.INTERRUPTED and ep.attrs["n_steps"] == 500
    assert replay(path).identical


def test_a_log_written_piece_by_piece_holds_the_same_episodes(tmp_path):
    """A log written between ticks (a realtime runner's) is written a piece per ``work`` call, a column
    larger than PIECE_BYTES a slab of rows at a time; it reads back as the same log written at
    once, a refused command's scalar and text fields included."""
    with Runner(make_task("reach"), seed=3) as r:
        run_episode(r, 1)
        r.send(StartCommand(2, 2))
        r.send(TrajectoryCommand(2, 1, 2, wave(r.robot.home, n=3000)))
        r.send(TrajectoryCommand(2, 2, 2, 5.0, rate="fast"))  # refused: a scalar q, a text rate
        episodes, metadata = list(r.episodes), r.metadata()
    whole, pieces = RunLog(tmp_path / "whole.h5", metadata), RunLog(tmp_path / "pieces.h5", metadata, "ticks")
    for ep in episodes:
        whole.write_episode(ep)
        pieces.write_episode(ep)
    calls = 1
    while pieces.work(0.0):  # no time to spare: one piece a call
        calls += 1
    whole.close()
    pieces.close()
    assert pieces.failed_writes == whole.failed_writes == 0
    datasets = []
    with h5py.File(tmp_path / "pieces.h5") as f:
        f.visititems(lambda name, obj: datasets.append(name) if isinstance(obj, h5py.Dataset) else None)
    assert calls > len(datasets)
    for a, b in zip(read_episodes(tmp_path / "whole.h5"), read_episodes(tmp_path / "pieces.h5"), strict=True):
        assert _same(vars(a), vars(b)), a.name
    assert read_summary(tmp_path / "whole.h5")[0].tobytes() == read_summary(tmp_path / "pieces.h5")[0].tobytes()


def test_a_log_written_between_ticks_is_closed_a_table_at_a_time(tmp_path):
    """Between ticks the file is closed in pieces, one open table per call and then the file
    (closing them at once took 1-2 ms of a 2 ms tick), then its episodes read; without a budget
    (a runner closing) it is closed at once."""
    with Runner(make_task("reach"), seed=3) as r:
        run_episode(r, 1)
        run_episode(r, 2)
        episodes, metadata = list(r.episodes), r.metadata()
    log = RunLog(tmp_path / "ticks.h5", metadata, "ticks")
    log.write_episode(episodes[0])
    while log.work(0.0):
        pass
    tables, calls = len(log._tables), 0
    assert tables >= 5  # initial states, steps, segments, commands, their values, episodes, summary
    while log._file is not None:
        assert not log.work(0.0)
        calls += 1
    assert calls == tables + 1
    assert [ep.attrs["episode_id"] for ep in read_episodes(tmp_path / "ticks.h5")] == [1]
    log.write_episode(episodes[1])
    while log.work(0.0):
        pass
    assert log._tables
    log.close()  # no budget: closed at once
    assert [ep.attrs["episode_id"] for ep in read_episodes(tmp_path / "ticks.h5")] == [1, 2]


def test_step_rows_gathered_piece_by_piece_are_the_rows_gathered_at_once():
    """Between ticks each piece of /steps gathers only its own rows from the episode's blocks; any
    split of the rows, across the blocks' ends or within one block, gives the same rows."""
    from episodic.logs.writer import _step_rows

    dtype = np.dtype([("time", "<f8"), ("q", "<f8", (2,)), ("index", "<i4")])
    rng = np.random.default_rng(0)
    blocks = [{"time": rng.random(n), "q": rng.random((n, 2)), "index": rng.integers(0, 9, n)} for n in (3, 5, 1, 4)]
    whole = _step_rows(dtype, blocks, 0, 13)
    assert np.array_equal(whole["q"], np.concatenate([b["q"] for b in blocks]))
    for cuts in ([0, 13], [0, 2, 3, 9, 13], [0, 8, 9, 10, 13], list(range(14))):
        pieces = [_step_rows(dtype, blocks, a, b) for a, b in zip(cuts, cuts[1:])]
        assert np.concatenate(pieces).tobytes() == whole.tobytes(), cuts


def _same(a, b) -> bool:
    """Whether two values read from logs are equal, arrays in dtype and every element."""
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(map(_same, a, b))
    if isinstance(a, np.ndarray):
        return isinstance(b, np.ndarray) and a.dtype == b.dtype and np.array_equal(a, b)
    return a == b


KILLED_RUN = """
import sys, numpy as np
from episodic.runtime.runner import Runner
from episodic.interface.commands import StartCommand, TrajectoryCommand
from episodic.tasks import make_task
from tests.helpers import wave
r = Runner(make_task("reach"), log=sys.argv[1])
for ep in range(1, 3):
    r.send(StartCommand(ep, 2))
    for k in (1, 2):
        r.send(TrajectoryCommand(ep, k, 2, wave(r.robot.home)))
r.send(StartCommand(3, 1000))
print("ready", flush=True)
k = 1
while True:  # an endless episode, killed from outside
    r.send(TrajectoryCommand(3, k, 1000, wave(r.robot.home)))
    k = k % 999 + 1
"""


@pytest.mark.slow
def test_killed_run_leaves_a_readable_file(tmp_path):
    path = tmp_path / "killed.h5"
    proc = subprocess.Popen([sys.executable, "-c", KILLED_RUN, str(path)], stdout=subprocess.PIPE,
                            cwd=Path(__file__).parent.parent, text=True)
    try:
        assert proc.stdout.readline().strip() == "ready"
        time.sleep(0.3)
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.wait(timeout=30)
    episodes = read_episodes(path)
    assert [e.attrs["episode_id"] for e in episodes] == [1, 2]
    assert all(e.attrs["flag"] == Flag.OK for e in episodes)
    assert replay(path).identical


def tear_last_row(path: Path) -> None:
    """Leave the last row of /episodes of the log at ``path`` as a kill while the writer flushed
    can: on disk, but the text it names (its attributes, in HDF5's global heap) not. Its heap
    reference is pointed at an object its collection lacks, through HDF5's own chunk access."""
    with h5py.File(path, "r+") as f:
        table = f["episodes"]
        last, per_chunk = table.shape[0] - 1, table.chunks[0]
        first = last // per_chunk * per_chunk  # the first row of the last row's chunk
        mask, raw = table.id.read_direct_chunk((first,))
        row = 8 + 16 + 7 * 8  # bytes of a row on disk: number, attrs (length, collection, index), 7 int64
        numbers = np.frombuffer(raw, "<i8")[:: row // 8][: last - first + 1]
        assert mask == 0 and numbers.tolist() == table.fields("number")[first : last + 1].tolist()  # rows as assumed
        torn = bytearray(raw)
        index = (last - first) * row + 8 + 4 + 8
        torn[index : index + 4] = (0x7FFF).to_bytes(4, "little")
        table.id.write_direct_chunk((first,), bytes(torn), mask)


def test_a_row_a_kill_left_without_its_text_leaves_the_others_readable(reach_log, tmp_path, caplog):
    tear_last_row(reach_log)
    with h5py.File(reach_log, "r") as f, pytest.raises(OSError, match="bad heap index"):
        f["episodes"][()]  # HDF5 itself cannot read the table whole
    assert [e.name for e in read_episodes(reach_log)] == ["000000"]
    assert "1 row of /episodes cannot be read" in caplog.text
    rows, partial = read_summary(reach_log)
    assert rows["number"].tolist() == [0] and partial == {}
    with pytest.raises(ValueError, match="no episode 000001"):
        read_episodes(reach_log, [1])
    from click.testing import CliRunner

    from episodic.cli.main import main

    replayed = CliRunner().invoke(main, ["replay", str(reach_log)])
    assert replayed.exit_code == 0 and "1 episode replayed bit-identically" in replayed.output, replayed.output
    compacted = CliRunner().invoke(main, ["compact", str(reach_log), str(tmp_path / "clean.h5")])
    assert compacted.exit_code == 0 and "the last 1 of /episodes" in compacted.output, compacted.output
    with h5py.File(tmp_path / "clean.h5", "r") as f:
        assert f["episodes"].fields("number")[()].tolist() == [0]  # whole again, without the row


@pytest.fixture
def small_disk(tmp_path):
    """A function mounting a tmpfs of the given size (e.g. "2m") and returning its directory
    (needs root; skipped where it cannot be mounted)."""
    mounted = []

    def mount(size: str) -> Path:
        where = tmp_path / f"disk{len(mounted)}"
        where.mkdir()
        done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(where)],
                              capture_output=True)
        if done.returncode != 0:
            pytest.skip(f"cannot mount a small tmpfs here: {done.stderr.decode().strip()}")
        mounted.append(where)
        return where

    try:
        yield mount
    finally:
        for where in mounted:
            subprocess.run(["umount", str(where)], check=True)


@pytest.mark.slow  # mounts a tmpfs (a `mount` process)
def test_a_full_disk_loses_no_episode_already_written(small_disk, caplog):
    path = small_disk("12m") / "run.h5"
    with Runner(make_task("reach"), log=path) as r:
        for episode_id in range(10):
            assert r.send(StartCommand(episode_id, 1)).flag == Flag.OK
            assert r.send(TrajectoryCommand(episode_id, 1, 1, wave(r.robot.home, n=2000))).flag == Flag.OK
    failed = r.log.failed_writes  # counted once the writes queued at the end are done (close)
    assert 0 < failed < 10
    assert "disk full" in caplog.text
    episodes = read_episodes(path)
    assert len(episodes) == 10 - failed and all(e.attrs["flag"] == Flag.OK for e in episodes)
    assert replay(path).identical


@pytest.mark.slow  # mounts a tmpfs (a `mount` process)
def test_the_reply_that_ends_an_episode_says_it_was_not_logged(small_disk):
    path = small_disk("2m") / "run.h5"
    with Runner(make_task("reach"), log=path) as r:
        short = wave(r.robot.home, n=50)
        replies = {}
        for episode_id, q in ((1, short), (2, wave(r.robot.home, n=2000)), (3, short)):
            r.send(StartCommand(episode_id, 1))
            replies[episode_id] = r.send(TrajectoryCommand(episode_id, 1, 1, q))
    assert all(reply.flag == Flag.OK for reply in replies.values())  # the flag stays the outcome
    assert replies[1].message == replies[3].message == ""
    assert replies[2].message.startswith("episode 000001 (id 2) was not logged in full (")
    assert "disk full" in replies[2].message and "free some space or log elsewhere" in replies[2].message
    assert [e.attrs["episode_id"] for e in read_episodes(path)] == [1, 3]
    assert partial_episodes(path) == {}
    assert replay(path).identical


@pytest.mark.slow  # mounts a tmpfs (a `mount` process)
def test_a_refusal_that_cannot_be_noted_is_said_in_its_reply(small_disk):
    disk = small_disk("2m")
    with Runner(make_task("reach"), log=disk / "run.h5") as r:
        free = os.statvfs(disk).f_bavail * os.statvfs(disk).f_frsize
        (disk / "filler").write_bytes(b"\0" * (free - (512 << 10)))  # leave less than the margin
        reply = r.send(TrajectoryCommand(5, 9, 9, wave(r.robot.home)))
    assert reply.flag == Flag.OUT_OF_ORDER
    assert "no episode is running" in reply.message
    assert "the refusal of command 9 of episode 5 was not logged in full" in reply.message


# -- the log is a new file -------------------------------------------------------------
def test_an_existing_log_is_refused_and_left_intact(reach_log):
    before = reach_log.read_bytes()
    with pytest.raises(LogError, match="exists .*never overwritten unless asked.*--overwrite"):
        Runner(make_task("reach"), log=reach_log)
    assert reach_log.read_bytes() == before
    assert replay(reach_log).identical
    with Runner(make_task("reach"), log=reach_log, overwrite=True) as r:
        run_episode(r, 7)
    assert [e.attrs["episode_id"] for e in read_episodes(reach_log)] == [7]


def test_bad_log_paths_are_refused_with_a_reason(tmp_path):
    target = tmp_path / "real.h5"
    (tmp_path / "link.h5").symlink_to(target)  # dangling: a link is refused, not followed
    (tmp_path / "a_file").write_text("x")
    cases = {tmp_path: "is a directory; give the log a file name",
             tmp_path / "link.h5": f"is a symbolic link \\(to {target}\\)",
             tmp_path / "a_file" / "run.h5": "cannot create the directory .*a_file for the log: a file is in "
                                             "the way",
             tmp_path / "a_file" / "deeper" / "run.h5": "cannot create the directory .*: Not a directory"}
    for path, reason in cases.items():
        with pytest.raises(LogError, match=reason):
            Runner(make_task("reach"), log=path)
    assert not target.exists()


def test_a_log_where_writing_is_not_permitted_is_refused():
    if not os.path.isdir("/sys") or os.access("/sys", os.W_OK) and not _refused("/sys/episodic-test.h5"):
        pytest.skip("/sys lets this user create files here")
    with pytest.raises(LogError, match="cannot write the log /sys/episodic-test.h5: (Permission denied|"
                                       "Operation not permitted|Read-only file system)"):
        Runner(make_task("reach"), log="/sys/episodic-test.h5")


def _refused(path: str) -> bool:
    try:
        open(path, "x").close()
    except OSError:
        return True
    os.remove(path)
    return False


# -- partial episodes ------------------------------------------------------------------
def test_an_episode_whose_rows_are_not_in_the_file_is_left_out_and_named(reach_log):
    with h5py.File(reach_log, "r+") as f:  # a damaged file: the last episode's steps cut off
        f["steps"].resize(f["episodes"][1]["steps_start"] + 10, axis=0)
        f["summary"].resize(1, axis=0)
    why = "its rows 1500..2999 of /steps are not in the file"
    assert partial_episodes(reach_log) == {"000001": why}
    assert [e.name for e in read_episodes(reach_log)] == ["000000"]
    with pytest.raises(ValueError, match="episode 000001 .* was not written whole \\(its rows"):
        read_episodes(reach_log, [1])
    report = replay(reach_log)
    assert report.identical and report.episodes == ["000000"]
    assert report.skipped == {"000001": why}
    rows, partial = read_summary(reach_log)  # the row /summary lacks from the episode's attributes
    assert rows["number"].tolist() == [0, 1] and rows["n_steps"].tolist() == [1500, 1500] and partial == {"000001": why}


@pytest.fixture
def v1_log(tmp_path) -> Path:
    """A log of format 1 (an episode a group), as the writer before format 2 wrote it: two reach
    episodes (120 and 2 steps) and a refusal."""
    path = tmp_path / "v1.h5"
    shutil.copyfile(Path(__file__).parent / "data" / "log_v1_reach.h5", path)
    return path


def test_a_log_of_format_1_reads_and_replays(v1_log):
    assert read_metadata(v1_log)["format"] == "episodic-log/1" and read_metadata(v1_log)["n_episodes"] == 2
    first, second = read_episodes(v1_log)
    assert (first.attrs["n_steps"], second.attrs["n_steps"]) == (120, 2) and first.steps["q"].shape == (120, 7)
    assert first.state_columns == ("target_x", "target_y", "target_z", "distance")
    assert [c[0]["type"] for c in first.commands] == ["StartCommand", "TrajectoryCommand", "TrajectoryCommand"]
    assert replay(v1_log).identical


def test_a_partial_episode_of_a_format_1_log_is_left_out_and_named(v1_log):
    with h5py.File(v1_log, "r+") as f:  # as a write that failed in the steps leaves it
        g = f["episodes/000001"]
        g.attrs["complete"] = False
        del g["steps/q"], g["segments"], g["commands"]
        f["summary"].resize(1, axis=0)
    assert partial_episodes(v1_log) == {"000001": "its write did not finish"}
    assert [e.name for e in read_episodes(v1_log)] == ["000000"]
    with pytest.raises(ValueError, match="episode 000001 .* was not written whole \\(its write did not finish\\)"):
        read_episodes(v1_log, [1])
    report = replay(v1_log)
    assert report.identical and report.episodes == ["000000"]
    assert report.skipped == {"000001": "its write did not finish"}
    rows, partial = read_summary(v1_log)
    assert rows["number"].tolist() == [0, 1] and partial == {"000001": "its write did not finish"}


def test_a_damaged_episode_of_an_older_log_is_judged_by_its_parts(v1_log):
    with h5py.File(v1_log, "r+") as f:
        for name in ("000000", "000001"):
            del f[f"episodes/{name}"].attrs["complete"]  # as before the attribute existed
        del f["episodes/000000/steps/q"]
        del f["summary"]
    assert partial_episodes(v1_log) == {"000000": "no steps/q"}
    assert [e.name for e in read_episodes(v1_log)] == ["000001"]
    report = replay(v1_log)
    assert report.identical and report.skipped == {"000000": "no steps/q"}


# -- the run summary, the rejected table, memory -----------------------------------------
def test_the_summary_has_one_row_per_episode_equal_to_its_attrs(reach_log):
    with h5py.File(reach_log) as f:
        summary = f["summary"]
        assert summary.dtype == SUMMARY_DTYPE and summary.maxshape == (None,) and summary.chunks
        rows = summary[()]
    assert rows["number"].tolist() == [0, 1]
    for row, episode in zip(rows, read_episodes(reach_log), strict=True):
        attrs = episode.attrs
        for name in ("episode_id", "return", "flag", "success", "n_steps", "wall_time"):
            assert row[name] == attrs[name], name
        assert row["timing_ticks"] == 0 and np.isnan(row["timing_period_error_p99"])


@pytest.mark.serial
def test_the_summary_of_a_realtime_run_holds_its_tick_timing(tmp_path):
    path = tmp_path / "rt.h5"
    with Runner(make_task("reach"), log=path, mode="realtime") as r:
        r.send(StartCommand(1, 1))
        r.send(TrajectoryCommand(1, 1, 1, wave(r.robot.home, n=50)))
    (ep,) = read_episodes(path)
    (row,), _ = read_summary(path)
    for name in ("timing_ticks", "timing_missed", "timing_period_error_p50", "timing_period_error_max"):
        assert row[name] == ep.attrs[name] and (name == "timing_missed" or row[name] > 0), name


def test_refusals_are_appended_to_the_rejected_table(tmp_path):
    path = tmp_path / "r.h5"
    with Runner(make_task("reach"), log=path) as r:
        q = wave(r.robot.home, n=10)
        flags = [r.send(TrajectoryCommand(5, k % 3 + 1, 3, q)).flag for k in range(1100)]
    assert set(flags) == {Flag.OUT_OF_ORDER}
    with h5py.File(path) as f:
        table = f["rejected"]
        assert table.maxshape == (None, 3) and table.chunks  # grown in place, not rewritten
        assert table[()].tolist() == [[5, k % 3 + 1, Flag.OUT_OF_ORDER] for k in range(1100)]
        assert list(table.attrs["columns"]) == ["episode_id", "index", "flag"]


@pytest.mark.slow
def test_a_logging_runner_keeps_no_python_object_per_episode(tmp_path):
    path = tmp_path / "many.h5"
    with Runner(make_task("reach"), log=path, keep_episodes=False) as r:
        q = wave(r.robot.home, n=50)

        def run(first: int, n: int) -> None:
            for episode_id in range(first, first + n):
                r.send(StartCommand(episode_id, 1))
                r.send(TrajectoryCommand(episode_id, 1, 1, q))
                r.send(TrajectoryCommand(episode_id, 2, 1, q))  # refused: logged in /rejected

        def settled() -> int:
            """Python objects once the writer thread has written what is queued (episodes it has
            not reached yet are held until then, more of them the busier the machine)."""
            deadline = time.monotonic() + 60
            while r.log._pending and time.monotonic() < deadline:
                time.sleep(0.01)
            gc.collect()
            return len(gc.get_objects())

        run(0, 50)
        before = settled()
        run(50, 400)
        grown = settled() - before
    with h5py.File(path, "r") as f:
        strategy = f.id.get_create_plist().get_file_space_strategy()[0]
    assert grown < 40, f"{grown} more Python objects after 400 episodes"
    assert strategy == h5py.h5f.FSPACE_STRATEGY_NONE  # HDF5 keeps no in-memory record per freed block
    assert len(read_summary(path)[0]) == 450


def _bomb(f: h5py.File) -> None:
    """/steps replaced by a compressed table declaring 2^27 rows, a few bytes in the file."""
    dtype, columns = f["steps"].dtype, f["steps"].attrs["columns"]
    del f["steps"]
    f.create_dataset("steps", shape=(1 << 27,), dtype=dtype, chunks=(1 << 10,), compression="gzip")
    f["steps"].attrs["columns"] = columns


def _linked(f: h5py.File) -> None:
    del f["steps"]
    f["steps"] = h5py.ExternalLink(str(Path(f.filename).with_name("other.h5")), "/x")


def _rows_beyond(f: h5py.File) -> None:
    rows = f["episodes"][()]
    rows["n_steps"][1] = 1 << 40
    f["episodes"][...] = rows


def _commands_not_json(f: h5py.File) -> None:
    f["commands"][f["episodes"][1]["commands_start"]] = "{" * 10_000


CRAFTED = {  # a format-2 log crafted against its readers: what read_episodes(path, [1]) says
    "a compressed bomb of steps": (_bomb, "expands|declares"),
    "an external link to the steps": (_linked, "external link"),
    "a row naming rows the file lacks": (_rows_beyond, "not written whole"),
    "a command that is not JSON": (_commands_not_json, "episode 000001 .* is damaged"),
}


@pytest.mark.parametrize("case", CRAFTED)
def test_a_crafted_log_of_format_2_gets_a_message(reach_log, case):
    change, message = CRAFTED[case]
    with h5py.File(reach_log.with_name("other.h5"), "w") as other:
        other["x"] = np.zeros(3)
    with h5py.File(reach_log, "r+") as f:
        change(f)
    with pytest.raises(ValueError, match=message):
        read_episodes(reach_log, [1])
    from click.testing import CliRunner

    from episodic.cli.main import main

    for command in ("info", "replay"):
        result = CliRunner().invoke(main, [command, str(reach_log)])
        assert "Traceback" not in result.output and result.exception is None or isinstance(result.exception, SystemExit)
