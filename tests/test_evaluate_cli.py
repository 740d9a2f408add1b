"""`episodic evaluate BATCH.h5`, run for real: a batch taken from a run log and one written with
plain h5py in the documented layout (as Octave's h5create/h5write would) give the results of
in-process evaluation, the --out log replays bit-identically, and a malformed file is refused
with a clear message."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import h5py
import numpy as np
import pytest
from click.testing import CliRunner

from episodic.cli.main import main
from episodic.interface.commands import GainsCommand, StartCommand, TrajectoryCommand
from episodic.logs import read_summary
from episodic.runtime.runner import Runner
from episodic.tasks import make_task
from episodic.tools.batch import evaluate, read_batch
from episodic.tools.replay import replay
from tests.helpers import wave
from tests.test_batch import ROBOT, reach_episode, refused_episode

PARAMS = {"tolerance": 0.05}


def run_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "episodic", *args], capture_output=True, text=True, timeout=120)


def table(output: str) -> list[tuple[str, str, str]]:
    """(return, flag, success) per row of evaluate's table."""
    lines = output.splitlines()
    head = next(i for i, line in enumerate(lines) if line.split()[:2] == ["episode", "return"])
    rows = [line.split() for line in lines[head + 2:]]
    return [tuple(row[1:]) for row in rows if len(row) == 4 and row[0].isdigit()]


def expected_rows(results) -> list[tuple[str, str, str]]:
    return [(f"{r.episode_return:.8g}", r.flag.name, "yes" if r.success else "no") for r in results]


@pytest.fixture(scope="module")
def run_log(tmp_path_factory) -> Path:
    """A reach run of four episodes (one refused at its first segment), seed 4, parameters PARAMS."""
    path = tmp_path_factory.mktemp("evaluate") / "run.h5"
    with Runner(make_task("reach", PARAMS), log=path, seed=4) as runner:
        for episode in [reach_episode(k) for k in range(3)] + [refused_episode(3)]:
            for command in episode:
                if runner.send(command).episode_done:
                    break
    return path


@pytest.mark.slow  # an `episodic evaluate` process
def test_a_batch_taken_from_a_log_gives_the_in_process_results_and_its_out_log_replays(run_log, tmp_path):
    out = tmp_path / "out.h5"
    done = run_cli("evaluate", str(run_log), "--threads", "2", "--out", str(out))
    assert done.returncode == 0, done.stderr
    assert "task reach (effort=0.0001, tolerance=0.05," in done.stdout and "seed 4, on 2 threads" in done.stdout
    results = evaluate(read_batch(run_log).episodes, ("reach", PARAMS), seed=4)
    assert table(done.stdout) == expected_rows(results)
    assert [r.flag.name for r in results] == ["OK", "OK", "OK", "DISCONTINUOUS"]
    assert "4 episodes in" in done.stdout and "episodes/s" in done.stdout and "0 of 4 successful" in done.stdout
    rows, _ = read_summary(out)
    assert rows["return"].tobytes() == np.array([r.episode_return for r in results]).tobytes()
    assert rows["batch"].tolist() == [0] * 4 and rows["batch_position"].tolist() == [0, 1, 2, 3]
    report = replay(out)
    assert report.identical and len(report.episodes) == 4, report.differences


def write_octave_style(path: Path) -> list[list]:
    """A batch file as documented, the way h5create/h5write leave one (scalars as 1 x 1 datasets,
    vectors as 1 x n, no kind, index or ids: all completed), episodes named 1, 2, 10; the same
    episodes as command objects."""
    home, kp, kd = ROBOT.home, ROBOT.kp, ROBOT.kd
    targets = {"1": [0.3, 0.4, 1.4], "2": [0.2, 0.5, 1.5], "10": [0.1, 0.5, 1.6]}
    episodes = []
    with h5py.File(path, "w") as f:
        f.attrs["task"] = "reach"
        f.attrs["task_params"] = json.dumps(PARAMS)
        for n, (name, target) in enumerate(targets.items()):
            q1, q2 = wave(home, n=200, amplitude=0.1 + 0.05 * n), wave(home, n=100, amplitude=0.05)
            cmds = f.create_group(f"episodes/{name}/commands")
            cmds.create_dataset("0/context", data=np.array([target]))
            cmds.create_dataset("1/q", data=q1)
            cmds.create_dataset("2/q", data=q2)
            cmds.create_dataset("2/wait_time", data=np.array([[0.1]]))
            cmds.create_dataset("3/kp", data=kp[None, :])
            cmds.create_dataset("3/kd", data=kd[None, :])
            cmds.create_dataset("3/ki", data=np.zeros((1, home.size)))
            cmds.create_dataset("3/wait_time", data=np.array([[0.2]]))
            i = n + 1
            episodes.append([StartCommand(i, 3, context=np.array(target)), TrajectoryCommand(i, 1, 3, q1),
                             TrajectoryCommand(i, 2, 3, q2, wait_time=0.1),
                             GainsCommand(i, 3, 3, kp, kd, np.zeros(home.size), wait_time=0.2)])
    return episodes


@pytest.mark.slow  # an `episodic evaluate` process
def test_a_batch_written_in_the_documented_layout_gives_the_in_process_results(tmp_path):
    path = tmp_path / "octave.h5"
    episodes = write_octave_style(path)
    done = run_cli("evaluate", str(path), "--seed", "2")
    assert done.returncode == 0, done.stderr
    results = evaluate(episodes, ("reach", PARAMS), seed=2)
    assert [r.flag.name for r in results] == ["OK"] * 3 and all(len(r.flags) == 4 for r in results)
    assert table(done.stdout) == expected_rows(results)
    assert "robot wam, seed 2, on 1 thread" in done.stdout


def invoke(*args: str):
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


def broken(path: Path, change) -> Path:
    """A one-episode batch file (task reach) with ``change(commands group)`` applied."""
    with h5py.File(path, "w") as f:
        f.attrs["task"] = "reach"
        cmds = f.create_group("episodes/000000/commands")
        cmds.create_group("000")
        cmds.create_dataset("001/q", data=wave(ROBOT.home, n=50))
        change(cmds)
    return path


@pytest.mark.parametrize("change, message", [
    (lambda c: c["001"].attrs.update(kind=7), "/episodes/000000/commands/001: unknown kind 7"),
    (lambda c: c.__delitem__("001/q"), "a trajectory command needs the dataset 'q'"),
    (lambda c: c["001"].create_dataset("wait_time", data=[0.1, 0.2]), "'wait_time' must be one number"),
    (lambda c: c["001"].create_dataset("qd", data=np.array([b"x"])), "'qd' must be numeric"),
    (lambda c: c["000"].attrs.update(index=0.5), "'index' must be a whole number"),
    (lambda c: c.file["episodes"].create_group("000001"), "/episodes/000001 has no commands/ group"),
])
def test_a_malformed_batch_is_refused_with_what_is_wrong(tmp_path, change, message):
    result = invoke("evaluate", str(broken(tmp_path / "bad.h5", change)))
    assert result.exit_code == 1 and message in result.output, result.output


def test_a_file_that_is_no_batch_is_refused(tmp_path):
    text = tmp_path / "notes.h5"
    text.write_text("not HDF5")
    no_episodes = tmp_path / "empty.h5"
    h5py.File(no_episodes, "w").close()
    for path, message in ((text, "is not an HDF5 file"), (no_episodes, "has no /episodes group"),
                          (tmp_path / "missing.h5", "no such file")):
        result = invoke("evaluate", str(path))
        assert result.exit_code == 1 and message in result.output, result.output
    nameless = broken(tmp_path / "nameless.h5", lambda c: c.file.attrs.__delitem__("task"))
    result = invoke("evaluate", str(nameless))
    assert result.exit_code == 2 and "give --task NAME" in result.output
    assert invoke("evaluate", str(nameless), "--task", "reach").exit_code == 0


@pytest.mark.slow  # an `episodic evaluate` process
def test_a_file_that_is_no_batch_is_refused_by_the_command_without_a_traceback(tmp_path):
    text = tmp_path / "notes.h5"
    text.write_text("not HDF5")
    done = run_cli("evaluate", str(text))
    assert done.returncode == 1 and "Traceback" not in done.stderr and "is not an HDF5 file" in done.stderr


def test_a_batch_naming_its_robot_by_a_path_is_refused_unless_the_user_gives_it(tmp_path):
    """A file names its robot; a path it names is never loaded (a crafted file could point anywhere)."""
    path = broken(tmp_path / "crafted.h5", lambda c: c.file.attrs.update(robot=str(tmp_path / "planted")))
    result = invoke("evaluate", str(path))
    assert result.exit_code == 2 and "never loaded from a path the file names: give --robot PATH" in result.output
