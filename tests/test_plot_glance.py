"""Plots that read at a glance: every task says what its state columns and step reward are, the
episode plot shows plain numbers, draws a joint that does not move flat and has one legend, and
`episodic plot --summary` is one page with the learning curve and the best episode's picture.
Real logs, real matplotlib (Agg), the real renderer; no mocks."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from episodic.cli.main import main
from episodic.interface.commands import StartCommand, TrajectoryCommand
from episodic.logs import read_episodes, read_summary
from episodic.runtime.runner import Runner
from episodic.tasks import TASKS, make_task
from tests.helpers import require_matplotlib, wave

HELD = (0, 2)  # the joints the second episode holds at home (j1 and j3 of the WAM)
UNITS = {"", "m", "m/s", "rad", "rad/s"}


@pytest.fixture()
def matplotlib_installed():
    require_matplotlib()


def test_every_task_says_what_its_columns_and_reward_are():
    built_in = {name: cls for name, cls in TASKS.items() if cls.__module__.startswith("episodic.tasks.")}
    assert len(built_in) >= 9
    for name, cls in built_in.items():
        assert set(cls.column_docs) == set(cls.columns), name
        for column, (unit, meaning) in cls.column_docs.items():
            assert unit in UNITS and meaning and "\n" not in meaning, (name, column)
        assert cls.reward_doc and len(cls.reward_doc) <= 120, name


@pytest.fixture(scope="module")
def reach_log(tmp_path_factory) -> Path:
    """Two reach episodes of one wave segment: the first moves every joint, the second holds
    the joints HELD at home."""
    path = tmp_path_factory.mktemp("glance") / "reach.h5"
    with Runner(make_task("reach"), log=path, seed=0) as runner:
        home = runner.robot.home
        for episode_id, held in ((1, ()), (2, HELD)):
            segment = wave(home)
            segment[:, list(held)] = home[list(held)]
            runner.send(StartCommand(episode_id, 1, context=np.array([0.5, 0.2, 1.5])))
            runner.send(TrajectoryCommand(episode_id, 1, 1, segment))
    return path


@pytest.mark.slow
def test_an_episode_plot_has_plain_numbers_flat_still_joints_and_one_legend(matplotlib_installed, reach_log,
                                                                            tmp_path):
    from episodic.tools.plot import FLAT_SPAN, MOTIONLESS, plot

    done = plot(reach_log, 1, tmp_path / "held.png")
    (ep,) = read_episodes(reach_log, [1])
    q = ep.steps["q"]
    figure = done.figure
    for ax in figure.axes:
        assert not ax.yaxis.get_major_formatter().get_useOffset(), ax.get_title()
        assert ax.get_legend() is None, ax.get_title()
    (legend,) = figure.legends
    assert [t.get_text() for t in legend.get_texts()][:3] == [
        "desired q_d", "measured q, error, torque u, state, reward", "torque limit"]
    positions = [ax for ax in figure.axes if ": position" in ax.get_title()]
    assert len(positions) == q.shape[1]
    for j, ax in enumerate(positions):
        still = j in HELD
        assert np.ptp(q[:, j]) < MOTIONLESS if still else np.ptp(q[:, j]) > MOTIONLESS
        assert ("(still" in ax.get_title()) == still, ax.get_title()
        low, high = ax.get_ylim()
        if still:
            assert high - low == pytest.approx(FLAT_SPAN) and low < q[:, j].mean() < high
        else:
            assert low <= q[:, j].min() and q[:, j].max() <= high
    reward = [ax for ax in figure.axes if ax.get_title().startswith("step reward: ")]
    assert len(reward) == 1 and "distance" in reward[0].get_title()


@pytest.mark.slow
def test_the_summary_page(matplotlib_installed, reach_log, tmp_path, monkeypatch):
    from episodic.tools.plot import THUMBNAIL

    monkeypatch.chdir(tmp_path)
    run = CliRunner().invoke(main, ["plot", str(reach_log), "--summary"])
    assert run.exit_code == 0, run.output
    assert run.output == "wrote the plot of the summary of 2 episodes to reach_summary.png\n"
    assert (tmp_path / "reach_summary.png").stat().st_size > 10_000
    rows, _ = read_summary(reach_log)
    best = int(rows["number"][np.argmax(rows["return"])])
    from episodic.tools.plot import plot

    figure = plot(reach_log, out=tmp_path / "again.png", summary=True).figure
    curve, rate, picture, numbers = figure.axes
    assert curve.get_title() == "return per episode" and rate.get_ylabel() == "success [%]"
    assert np.array_equal(curve.lines[0].get_ydata(), rows["return"])
    assert picture.get_title().startswith(f"the best episode: episode {best} at its end")
    (image,) = picture.images
    assert image.get_array().shape == (THUMBNAIL[1], THUMBNAIL[0], 3)
    assert np.ptp(image.get_array()) > 50  # a picture, not a blank
    (text,) = numbers.texts
    assert "episodes: 2," in text.get_text() and "step reward: -(distance" in text.get_text()
    both = CliRunner().invoke(main, ["plot", str(reach_log), "--summary", "--episode", "1"])
    assert both.exit_code == 1 and "leave out --episode" in both.output
