"""HDF5 run logs and replay, with real files and a real killed process."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import h5py
import numpy as np
import pytest

from episodic.commands import StartCommand, TrajectoryCommand
from episodic.columns import STEP_DTYPES
from episodic.log import read_episodes, read_metadata
from episodic.machine import Flag
from episodic.replay import replay
from episodic.runner import Runner
from episodic.tasks import make_task
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
        g = f["episodes/000000"]
        n = g.attrs["n_steps"]
        assert set(g["steps"]) == set(STEP_DTYPES)
        for name in ("q", "qd", "qdd", "q_d", "qd_d", "qdd_d", "u", "u_ff"):
            assert g["steps"][name].shape == (n, 7)
        assert g["steps/ee_pos"].shape == (n, 3) and g["steps/ee_quat"].shape == (n, 4)
        assert list(g["steps/task_state"].attrs["columns"]) == ["target_x", "target_y", "target_z", "distance"]
        assert g["segments/reward"].shape == (3,)
        assert g.attrs["return"] == pytest.approx(g["segments/reward"][()].sum())
        assert len(g["commands"]) == 4
        assert json.loads(f.attrs["task_params"])["tolerance"] == 0.02


def test_replay_is_bit_identical(reach_log):
    report = replay(reach_log)
    assert report.identical, report.differences
    assert report.episodes == ["000000", "000001"]
    assert replay(reach_log, [1]).identical


def test_replay_reports_a_changed_command(reach_log):
    with h5py.File(reach_log, "a") as f:
        f["episodes/000001/commands/002/q"][100, 1] += 1e-6
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


def test_closing_mid_episode_keeps_its_steps(tmp_path):
    path = tmp_path / "r.h5"
    with Runner(make_task("reach"), log=path) as r:
        r.send(StartCommand(1, 3))
        r.send(TrajectoryCommand(1, 1, 3, wave(r.robot.home)))
    (ep,) = read_episodes(path)
    assert ep.attrs["flag"] == Flag.INTERRUPTED and ep.attrs["n_steps"] == 500
    assert replay(path).identical


KILLED_RUN = """
import sys, numpy as np
from episodic.runner import Runner
from episodic.commands import StartCommand, TrajectoryCommand
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


@pytest.fixture
def small_disk(tmp_path):
    """A 12 MB tmpfs (needs root; skipped where it cannot be mounted)."""
    mount = tmp_path / "disk"
    mount.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=12m", "tmpfs", str(mount)], capture_output=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs here: {done.stderr.decode().strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", str(mount)], check=True)


def test_a_full_disk_loses_no_episode_already_written(small_disk, caplog):
    path = small_disk / "run.h5"
    with Runner(make_task("reach"), log=path) as r:
        for episode_id in range(10):
            assert r.send(StartCommand(episode_id, 1)).flag == Flag.OK
            assert r.send(TrajectoryCommand(episode_id, 1, 1, wave(r.robot.home, n=2000))).flag == Flag.OK
        failed = r.log.failed_writes
    assert 0 < failed < 10
    assert "No space" in caplog.text or "bytes free" in caplog.text
    episodes = read_episodes(path)
    assert len(episodes) == 10 - failed and all(e.attrs["flag"] == Flag.OK for e in episodes)
    assert replay(path).identical
