"""`episodic plot`: the figures hold the log's arrays, labelled, and the PNG files have the
figure's size. Real logs, real matplotlib (Agg), no mocks.

Without the plot extra (matplotlib) these tests skip with the reason, except in CI (CI=true),
where they fail."""
from __future__ import annotations

import struct
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from episodic.cli.main import main
from episodic.logs import read_episodes, read_metadata, read_summary
from episodic.runtime.runner import Runner
from episodic.tasks import make_task
from tests.helpers import require_matplotlib, run_episode

N_EPISODES = 3


@pytest.fixture(autouse=True)
def matplotlib_installed():
    require_matplotlib()


@pytest.fixture(scope="module")
def reach_log(tmp_path_factory) -> Path:
    """Three reach episodes of three segments each, the second aimed at a target it reaches."""
    path = tmp_path_factory.mktemp("plot") / "reach.h5"
    with Runner(make_task("reach"), log=path, seed=0) as runner:
        for episode_id in range(1, N_EPISODES + 1):
            run_episode(runner, episode_id, n_segments=2 if episode_id == 2 else 3)
    return path


def png_size(path: Path) -> tuple[int, int]:
    """(width, height) from a PNG file's header."""
    head = path.read_bytes()[:24]
    assert head[:8] == b"\x89PNG\r\n\x1a\n" and head[12:16] == b"IHDR"
    return struct.unpack(">II", head[16:24])


def by_title(figure) -> dict:
    return {ax.get_title(): ax for ax in figure.axes}


@pytest.mark.slow
def test_an_episode_plot_holds_the_logs_arrays(reach_log, tmp_path):
    from episodic.tools.plot import DPI, episode_size, plot

    done = plot(reach_log, 1, tmp_path / "ep1.png")
    (ep,) = read_episodes(reach_log, [1])
    meta = read_metadata(reach_log)
    steps = ep.steps
    joints = meta["robot_settings"]["joint_names"]
    limits = meta["robot_settings"]["torque_limit"]
    moving = np.flatnonzero(steps["index"] >= 1)
    t = steps["time"] - steps["time"][moving[0]]
    axes = by_title(done.figure)
    assert len(done.figure.axes) == 3 * len(joints) + len(ep.state_columns) + 2
    for j, name in enumerate(joints):
        position = axes[f"{name}: position"]
        assert position.get_ylabel() == "q [rad]"
        desired, measured = position.lines
        assert np.array_equal(desired.get_xdata(), t)
        assert np.array_equal(desired.get_ydata(), steps["q_d"][:, j])
        assert np.array_equal(measured.get_ydata(), steps["q"][:, j])
        error = axes[f"{name}: tracking error q_d - q"]
        assert error.get_ylabel() == "error [mrad]" and len(error.lines) == 1
        assert np.array_equal(error.lines[0].get_ydata(), 1e3 * (steps["q_d"][:, j] - steps["q"][:, j]))
        torque = axes[f"{name}: applied torque"]
        assert torque.get_ylabel() == "u [N m]"
        u, upper, lower = torque.lines
        assert np.array_equal(u.get_ydata(), steps["u"][:, j])
        assert list(upper.get_ydata()) == [limits[j]] * 2 and list(lower.get_ydata()) == [-limits[j]] * 2
    docs = make_task("reach").column_docs
    for k, column in enumerate(ep.state_columns):
        state = axes[f"{column}: {docs[column][1]}"]
        assert state.get_ylabel() == f"{column} [{docs[column][0]}]"
        (line,) = state.lines
        assert np.array_equal(line.get_ydata(), steps["task_state"][:, k])
    (reward,) = axes[next(title for title in axes if title.startswith("step reward: "))].lines
    assert np.array_equal(reward.get_ydata(), steps["reward"])
    (so_far,) = axes["return so far (sum of the step rewards)"].lines
    assert so_far.get_ydata()[-1] == pytest.approx(ep.attrs["return"], rel=1e-9)
    assert reward.axes.get_xlabel() == "time since the motion started [s]"
    title = done.figure.get_suptitle()
    assert f"reach on wam: episode 1 (id 2), return {ep.attrs['return']:.5g}, OK" in title
    width, height = episode_size(len(joints), len(ep.state_columns))
    assert png_size(done.out) == (round(width * DPI), round(height * DPI))
    assert done.what == "episode 1" and done.out.stat().st_size < 400_000


def test_a_run_plot_is_its_learning_curve(reach_log, tmp_path):
    from episodic.tools.plot import DPI, RUN_SIZE, plot, running_mean

    done = plot(reach_log, None, tmp_path / "run.png")
    rows, _ = read_summary(reach_log)
    assert done.what == f"the returns of {N_EPISODES} episodes"
    top, bottom = done.figure.axes
    assert top.get_title() == "return per episode" and top.get_ylabel() == "return"
    returns, successes, failures, mean = top.lines
    assert np.array_equal(returns.get_xdata(), np.arange(N_EPISODES))
    assert np.array_equal(returns.get_ydata(), rows["return"])
    success = rows["success"].astype(bool)
    assert np.array_equal(successes.get_ydata(), rows["return"][success])
    assert np.array_equal(failures.get_ydata(), rows["return"][~success])
    assert np.allclose(mean.get_ydata(), [np.mean(rows["return"][: k + 1]) for k in range(N_EPISODES)])
    (rate,) = bottom.lines
    assert bottom.get_ylabel() == "success [%]"
    assert np.allclose(rate.get_ydata(), 100 * running_mean(success, N_EPISODES))
    assert png_size(done.out) == (round(RUN_SIZE[0] * DPI), round(RUN_SIZE[1] * DPI))


def test_running_mean():
    from episodic.tools.plot import running_mean

    assert running_mean(np.array([1.0, 3.0, 5.0, 7.0]), 2).tolist() == [1.0, 2.0, 4.0, 6.0]
    assert running_mean(np.array([1.0, 0.0, 1.0]), 5).tolist() == [1.0, 0.5, 2 / 3]


@pytest.mark.slow
def test_plot_command(reach_log, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    runner = CliRunner()
    run = runner.invoke(main, ["plot", str(reach_log)])
    assert run.exit_code == 0, run.output
    assert run.output == f"wrote the plot of the returns of {N_EPISODES} episodes to reach_returns.png\n"
    assert (tmp_path / "reach_returns.png").is_file()
    one = runner.invoke(main, ["plot", str(reach_log), "--episode", "2", "--out", "plots/two.png"])
    assert one.exit_code == 0 and one.output == "wrote the plot of episode 2 to plots/two.png\n", one.output
    assert png_size(tmp_path / "plots" / "two.png")[0] > 0
    for args, message in ((["--episode", "7"], "has no episode 000007"), (["--out", "x.jpg"], "give a .png file")):
        bad = runner.invoke(main, ["plot", str(reach_log), *args])
        assert bad.exit_code == 1 and message in bad.output, bad.output


def test_a_log_of_one_episode_plots_that_episode(tmp_path):
    path = tmp_path / "one.h5"
    with Runner(make_task("reach"), log=path) as runner:
        run_episode(runner, 7, n_segments=1)
    result = CliRunner().invoke(main, ["plot", str(path), "--out", str(tmp_path / "one.png")])
    assert result.exit_code == 0 and "wrote the plot of episode 0" in result.output, result.output


@pytest.mark.slow
def test_plot_without_matplotlib_says_what_to_install(reach_log, tmp_path):
    blocked = "import sys; sys.modules['matplotlib'] = None; from episodic.cli.main import main; main()"
    done = subprocess.run([sys.executable, "-c", blocked, "plot", str(reach_log)], cwd=tmp_path,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 1
    assert "pip install 'episodic[plot]'" in done.stderr and "Traceback" not in done.stderr
