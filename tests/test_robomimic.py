"""robomimic's dataset layout: a real reach run's log exported, checked against the keys,
attributes and shapes robomimic documents ("Dataset Structure") and against the log's own
arrays. Real HDF5 files and a real Runner, no mocks."""
from __future__ import annotations

import json
from pathlib import Path

import h5py
import numpy as np
import pytest
from click.testing import CliRunner

from episodic.cli.main import main
from episodic.interface.commands import ResetCommand, StartCommand
from episodic.logs import read_episodes, read_metadata
from episodic.runtime.runner import Runner
from episodic.tasks import make_task
from episodic.tools.export.robomimic import export_robomimic
from examples.reach_learner import demo_targets, run_reach_demo
from tests.helpers import run_episode

OBS = {"joint_pos": ("q", 7), "joint_vel": ("qd", 7), "eef_pos": ("ee_pos", 3), "eef_quat": ("ee_quat", 4),
       "target_x": (0, 1), "target_y": (1, 1), "target_z": (2, 1), "distance": (3, 1)}


@pytest.fixture(scope="module")
def log(tmp_path_factory) -> Path:
    """Episodes 0, 1: reach-learner episodes (successful); 2: a start aborted during the move to
    the start (no learner step); 3: waves that miss the target."""
    path = tmp_path_factory.mktemp("rm") / "reach.h5"
    with Runner(make_task("reach"), log=path, seed=2) as r:
        r.machine.skip_goto_start = False  # the moves to the start simulated and logged (episodic.runtime.start)
        run_reach_demo(r, demo_targets(r, 2, 0))
        r.send(StartCommand(10, 2, posture=r.robot.home + 0.3, context=np.array([0.5, 0.2, 1.4])))
        r.send(ResetCommand(10, 1, 2))
        run_episode(r, 11, n_segments=2)
    return path


@pytest.fixture(scope="module")
def exported(log) -> tuple[Path, object]:
    out = log.with_name("out.hdf5")
    return out, export_robomimic(log, out)


def test_the_layout_is_robomimics(log, exported):
    out, result = exported
    with h5py.File(out, "r") as f:
        assert set(f) == {"data", "mask"}
        data = f["data"]
        assert sorted(data) == ["demo_0", "demo_1", "demo_2"]
        env = json.loads(data.attrs["env_args"])
        assert {"env_name", "env_type", "env_kwargs"} <= set(env) and env["env_name"] == "reach"
        assert env["type"] == env["env_type"] == 2 and isinstance(env["env_kwargs"], dict)
        total = 0
        for name in data:
            g = data[name]
            n = int(g.attrs["num_samples"])
            assert {"states", "actions", "rewards", "dones", "obs", "next_obs"} == set(g)
            assert g["states"].shape == (n, 18) and g["actions"].shape == (n, 7)
            assert g["rewards"].shape == (n,) and g["dones"].shape == (n,)
            for group in ("obs", "next_obs"):
                assert {k: g[group][k].shape for k in g[group]} == {k: (n, d) for k, (_, d) in OBS.items()}
            total += n
        assert data.attrs["total"] == total == result.total > 0
        assert env["env_kwargs"]["obs_keys"] == list(OBS)
        assert len(env["env_kwargs"]["states"]) == 18


def test_the_values_are_the_logs(log, exported):
    out, result = exported
    episodes = {int(e.name): e for e in read_episodes(log)}
    meta = read_metadata(log)
    lower = np.array(meta["robot_settings"]["range_lower"])
    upper = np.array(meta["robot_settings"]["range_upper"])
    assert result.demos == [("demo_0", 0), ("demo_1", 1), ("demo_2", 3)]
    moves = []  # steps of each episode's move to the start, left out
    with h5py.File(out, "r") as f:
        for name, number in result.demos:
            g, e = f["data"][name], episodes[number]
            s = e.steps
            mine = s["index"] >= 1
            assert g.attrs["episode"] == number and g.attrs["episode_id"] == e.attrs["episode_id"]
            n = int(mine.sum())
            assert g.attrs["num_samples"] == n == e.attrs["n_steps"] - int((s["index"] == 0).sum())
            moves.append(int((s["index"] == 0).sum()))
            for key, (column, _) in OBS.items():
                logged = s[column][mine] if isinstance(column, str) else s["task_state"][mine][:, column:column + 1]
                assert g["obs"][key][()].tobytes() == logged.tobytes(), key
                assert g["next_obs"][key][()].tobytes() == np.concatenate([logged[1:], logged[-1:]]).tobytes(), key
            assert g["states"][()].tobytes() == np.hstack([s["q"], s["qd"], s["task_state"]])[mine].tobytes()
            actions = g["actions"][()]
            assert actions.min() >= -1 and actions.max() <= 1
            np.testing.assert_allclose(lower + (actions + 1) / 2 * (upper - lower), s["q_d"][mine], rtol=0, atol=1e-12)
            assert g["rewards"][()].tobytes() == s["reward"][mine].tobytes()
            assert g["rewards"][()].sum() == pytest.approx(e.attrs["return"], rel=1e-12, abs=1e-12)
            assert g["dones"][()].tolist() == [0] * (n - 1) + [1]
    assert moves[0] == 0 and min(moves[1:]) > 100  # the first starts at home, the others move there


def test_the_success_filter_key_lists_the_successful_episodes(log, exported):
    out, result = exported
    success = {int(e.name): bool(e.attrs["success"]) for e in read_episodes(log)}
    assert success[0] and success[1] and not success[3]  # both outcomes are in the run
    with h5py.File(out, "r") as f:
        listed = [x.decode() for x in f["mask/success"][()]]
        assert listed == [name for name, number in result.demos if success[number]] == ["demo_0", "demo_1"]
        assert [int(f["data"][n].attrs["success"]) for n, _ in result.demos] == [1, 1, 0]


def test_progress_is_reported_per_episode_read(log, tmp_path):
    calls = []
    export_robomimic(log, tmp_path / "p.hdf5", progress=lambda done, total: calls.append((done, total)))
    assert calls == [(1, 4), (2, 4), (3, 4), (4, 4)]


def test_an_episode_without_learner_steps_is_skipped_and_reported(log, exported, tmp_path):
    assert list(exported[1].skipped) == ["000002"]
    result = CliRunner().invoke(main, ["export", str(log), "--format", "robomimic", "--out", str(tmp_path / "d.hdf5")])
    assert result.exit_code == 0, result.output
    assert "warning: episode 2 not exported: it has no step after the start" in result.output
    assert f"wrote 3 demos ({exported[1].total} samples) to {tmp_path / 'd.hdf5'}" in result.output


def test_the_command_line_selects_refuses_to_overwrite_and_replaces(log, tmp_path):
    runner = CliRunner()
    default = log.with_name("reach_robomimic.hdf5")
    try:
        assert runner.invoke(main, ["export", str(log), "--format", "robomimic", "-e", "3", "-e", "1"]).exit_code == 0
        with h5py.File(default, "r") as f:
            got = [(n, int(f["data"][n].attrs["episode"])) for n in sorted(f["data"])]
            assert got == [("demo_0", 1), ("demo_1", 3)]
        again = runner.invoke(main, ["export", str(log), "--format", "robomimic"])
        assert again.exit_code == 1 and "reach_robomimic.hdf5 exists" in again.output
        with h5py.File(default, "r") as f:
            assert len(f["data"]) == 2  # untouched
        forced = runner.invoke(main, ["export", str(log), "--format", "robomimic", "--overwrite"])
        assert forced.exit_code == 0, forced.output
        with h5py.File(default, "r") as f:
            assert len(f["data"]) == 3
        assert not list(log.parent.glob("*.partial"))
    finally:
        default.unlink(missing_ok=True)
