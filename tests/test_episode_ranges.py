"""Small things a user of the tools trips over: --episode takes a list and ranges (and the
repeated flag), info on a demonstration or a robomimic export says what it is and what reads it,
and a reach target the arm cannot reach is refused with a reply that says so."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from episodic.cli.episodes import parse_episodes
from episodic.cli.main import main
from episodic.interface.vocabulary import Flag
from episodic.runtime.runner import Runner
from episodic.tasks import make_task

N_EPISODES = 5


def invoke(*args: str):
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


@pytest.fixture(scope="module")
def log(tmp_path_factory) -> Path:
    """A reach log of N_EPISODES short episodes."""
    path = tmp_path_factory.mktemp("ranges") / "run.h5"
    with Runner(make_task("reach"), log=path) as runner:
        posture = runner.start_episode(1).posture
        runner.send_trajectory(np.tile(posture, (20, 1)))
        for _ in range(N_EPISODES - 1):
            runner.start_episode(1)
            runner.send_trajectory(np.tile(posture, (20, 1)))
    return path


@pytest.mark.parametrize(("spec", "numbers"), [("2 48", [2, 48]), ("3-7", [3, 4, 5, 6, 7]), ("1,4-6", [1, 4, 5, 6]),
                                               ("0", [0]), (" 2 - 3 , 9 ", [2, 3, 9])])
def test_episode_lists_and_ranges_are_parsed(spec, numbers):
    assert parse_episodes(spec) == numbers


@pytest.mark.parametrize(("spec", "says"), [("7-3", "runs backwards; give it as 3-7"), ("x", "is not a list"),
                                            ("-2", "is not a list"), ("0-99999999", "names over")])
def test_a_wrong_episode_list_is_refused_with_what_to_give(spec, says):
    with pytest.raises(ValueError, match=says):
        parse_episodes(spec)


@pytest.mark.slow  # replays and exports: a few seconds
@pytest.mark.parametrize("args", [("-e", "1", "3"), ("--episode", "1,3"), ("-e", "1", "-e", "3"), ("-e", "3", "1-1")])
def test_replay_and_export_take_lists_ranges_and_the_repeated_flag(log, tmp_path, args):
    replayed = invoke("replay", str(log), *args)
    assert replayed.exit_code == 0 and replayed.output == "2 episodes replayed bit-identically\n", replayed.output
    exported = invoke("export", str(log), "--format", "mrdplot", "--out", str(tmp_path), *args)
    assert exported.exit_code == 0, exported.output
    assert sorted(p.name for p in tmp_path.glob("*.mrd")) == ["run_ep000001.mrd", "run_ep000003.mrd"]


def test_a_range_past_the_log_and_more_than_one_episode_where_one_is_taken_are_refused(log):
    past = invoke("replay", str(log), "--episode", f"3-{N_EPISODES}")
    assert past.exit_code != 0 and f"has no episode {N_EPISODES:06d}" in past.output
    for command in ("render", "plot"):
        many = invoke(command, str(log), "--episode", "1", "2")
        assert many.exit_code == 2 and "this command takes one episode, not 2; give one number" in many.output


def test_info_on_a_demonstration_and_a_robomimic_export_says_what_reads_it(log, tmp_path):
    demo, robomimic = tmp_path / "demo.h5", tmp_path / "demo_robomimic.hdf5"
    assert invoke("demonstrate", "--from-log", str(log), "--episode", "2", "--out", str(demo)).exit_code == 0
    assert invoke("export", str(log), "--format", "robomimic", "--out", str(robomimic), "-e", "0-1").exit_code == 0
    said = invoke("info", str(demo))
    assert said.exit_code == 1
    assert said.output.startswith(f"Error: {demo} is not an episodic log: it is a demonstration (")
    assert "written by `episodic demonstrate`" in said.output and "Demonstration.load(path)" in said.output
    said = invoke("info", str(robomimic))
    assert said.exit_code == 1 and f"{robomimic} is not an episodic log: it is a robomimic dataset (2 demos; written " \
                                   f"by `episodic export --format robomimic`); robomimic reads it" in said.output


def test_a_reach_target_out_of_the_arms_reach_is_refused_with_the_reason():
    with Runner(make_task("reach")) as runner:
        far = runner.start_episode(1, context=np.array([5.0, 0.0, 1.0]))
        assert far.flag == Flag.INVALID_PAYLOAD and far.episode_done
        assert far.message.startswith("the target (5, 0, 1) m is 5.00 m from the arm's first joint, beyond its "
                                      "reach of ")
        assert "no posture reaches it; give a target within" in far.message
        near = runner.start_episode(2, context=runner.task.default_context())
        assert near.flag == Flag.OK
