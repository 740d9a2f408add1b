"""`episodic watch LOG` shows a run's state (--once prints it and exits), and `episodic plot LOG
--follow` re-draws the learning curve while a runner writes the log, bounded by --until, --timeout
and the run's end."""
from __future__ import annotations

import time

import numpy as np
import pytest
from click.testing import CliRunner

from episodic.cli.main import main
from episodic.interface.commands import StartCommand, TrajectoryCommand
from episodic.logs import being_written, read_summary
from episodic.runtime.runner import Runner
from episodic.tasks import make_task
from episodic.tools.batch import evaluate_into
from episodic.tools.plot import follow
from episodic.tools.watch import curve, describe, read_state

N_SINGLE = 6  # episodes sent one by one, then a batch of N_BATCH
N_BATCH = 4


def invoke(*args: str):
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


def run_episodes(runner: Runner) -> None:
    """N_SINGLE short reach episodes, each holding a posture further from the start, then a batch."""
    posture = runner.start_episode(1).posture
    runner.send_trajectory(np.tile(posture, (20, 1)))
    for k in range(1, N_SINGLE):
        runner.start_episode(1)
        runner.send_trajectory(np.tile(posture + 0.002 * k, (20, 1)))
    q = np.tile(posture, (20, 1))
    evaluate_into(runner, [[StartCommand(k, 1), TrajectoryCommand(k, 1, 1, q)] for k in range(N_BATCH)])


def wait_written(log, n: int) -> None:
    deadline = time.monotonic() + 10
    while len(read_summary(log)[0]) < n:
        assert time.monotonic() < deadline
        time.sleep(0.02)


def test_watch_once_shows_the_live_run_and_then_the_ended_one(tmp_path):
    log = tmp_path / "run.h5"
    with Runner(make_task("reach"), log=log, keep_episodes=True) as runner:
        run_episodes(runner)
        wait_written(log, N_SINGLE + N_BATCH)
        live = invoke("watch", str(log), "--once", "--window", "4")
        returns = [ep.episode_return for ep in runner.episodes]
    assert live.exit_code == 0, live.output
    lines = live.output.splitlines()
    assert lines[0] == "reach on wam; live: a runner is writing it"
    assert lines[1].startswith(f"episodes: {N_SINGLE + N_BATCH}, ")
    best = int(np.argmax(returns))
    assert lines[2] == (f"return: last {returns[-1]:.5g}, mean {np.mean(returns):.5g} (last 4: "
                        f"{np.mean(returns[-4:]):.5g}), best {returns[best]:.5g} (episode {best})")
    assert lines[3] == "success: 0 % of the last 4 episodes, 0 in all"
    assert lines[4].startswith("flags: OK ")
    assert lines[5] == f"batches: 1, the last (batch 0) with {N_BATCH} episodes so far (positions up to {N_BATCH - 1})"
    assert "│" in live.output and "└" in live.output
    ended = invoke("watch", str(log), "--once")
    assert ended.exit_code == 0 and ended.output.startswith("reach on wam; not being written (the run has ended)")


def test_a_text_curve_spans_the_values_from_one_eighth_to_full():
    lines = curve(np.array([0.0, 1.0, 2.0, 3.0]), width=4, height=2)
    assert [line[11:] for line in lines] == ["│  ▃█", "│▁▆██", "└────"]  # 1, 6, 11 and 16 eighths
    assert lines[0].split("│")[0].strip() == "3" and lines[1].split("│")[0].strip() == "0"
    assert curve(np.array([])) == [] and len(curve(np.ones(500), width=60)[-1]) == 11 + 1 + 60


@pytest.mark.slow  # matplotlib draws three learning curves: 8 s
def test_plot_follow_draws_while_the_run_lasts_and_stops_at_until_timeout_and_the_end(tmp_path):
    pytest.importorskip("matplotlib")
    log, out = tmp_path / "run.h5", tmp_path / "curve.png"
    drawn = []
    with Runner(make_task("reach"), log=log) as runner:
        run_episodes(runner)
        wait_written(log, N_SINGLE + N_BATCH)
        assert being_written(log)
        started = time.monotonic()
        last = follow(log, out, timeout=0.5, interval=0.1, drawn=drawn.append)
        assert 0.5 <= time.monotonic() - started < 5  # the run went on: it stopped at the timeout
        assert last is not None and [d.episodes for d in drawn] == [N_SINGLE + N_BATCH]  # drawn once: no new episode
        assert follow(log, out, until=N_SINGLE, interval=0.1).episodes == N_SINGLE + N_BATCH
    assert not being_written(log)
    done = invoke("plot", str(log), "--follow", "--out", str(out))  # the run has ended: one drawing
    assert done.exit_code == 0 and done.output == f"wrote the plot of the returns of {N_SINGLE + N_BATCH} " \
                                                  f"episodes to {out}\n"
    assert invoke("plot", str(log), "--until", "3").exit_code != 0


def test_describe_without_episodes_says_so(tmp_path):
    log = tmp_path / "empty.h5"
    Runner(make_task("reach"), log=log).close()
    text = describe(read_state(log))
    assert text == "reach on wam; not being written (the run has ended)\nepisodes: 0"
