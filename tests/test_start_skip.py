"""The go-to-start not simulated where the exact start follows it (episodic.runtime.start): the
episode, the replies and the machine's states are those of a simulated go-to-start but for the
start's steps (none logged, the reply says 0); the episode records ``goto_start``, and replay runs a
go-to-start as the log says it ran, a log written before the skip (no ``goto_start``) included.
Realtime runs and driven robots keep running it."""
from __future__ import annotations

import json
import logging
from pathlib import Path

import h5py
import numpy as np
import pytest

from episodic.interface.commands import ResetCommand, StartCommand, TrajectoryCommand
from episodic.interface.vocabulary import Flag, MachineState
from episodic.logs import read_episodes
from episodic.runtime.backend import MujocoDriver
from episodic.runtime.runner import Runner
from episodic.runtime.start import carried_sag
from episodic.tasks import make_task
from episodic.tools.export.mrdplot import export_mrdplot
from episodic.tools.export.robomimic import export_robomimic
from episodic.tools.replay import replay
from tests.helpers import wave
from tests.test_history import before, reference


def run(task: str, skip: bool, history: str = "after 10 random", log=None) -> tuple[Runner, list]:
    """The reference episode of ``task`` after ``history`` on a fresh blocking runner, its go-to-starts
    skipped or simulated: the (closed) runner and the reference's replies."""
    with Runner(make_task(task), seed=3, log=log) as runner:
        runner.machine.skip_goto_start = skip
        commands = reference(runner, before(runner, history))
        replies = [runner.send(c) for c in commands]
    return runner, replies


@pytest.mark.parametrize("task", ["reach", pytest.param("ball_in_cup", marks=pytest.mark.slow), "pole_balancing"])
def test_a_skipped_go_to_start_leaves_the_episode_and_the_replies_bit_identical(task):
    (ran, ran_replies), (skipped, replies) = run(task, False), run(task, True)
    a, b = ran.episodes[-1], skipped.episodes[-1]
    assert (a.goto_start, b.goto_start) == ("ran", "skipped")
    sa, sb = a.steps(), b.steps()
    goto = sa["machine_state"] == MachineState.GOTO_START
    assert goto.sum() > 100 and not np.any(sb["machine_state"] == MachineState.GOTO_START)
    for name in sa:
        assert sa[name][~goto].tobytes() == sb[name].tobytes(), name
    assert np.float64(a.episode_return).tobytes() == np.float64(b.episode_return).tobytes()
    assert a.flag == b.flag == Flag.OK and a.success == b.success
    assert replies[0].n_steps == 0 and ran_replies[0].n_steps == goto.sum()
    for k, (x, y) in enumerate(zip(ran_replies, replies, strict=True)):
        assert (x.flag, x.episode_done, x.machine_state, x.success) == (y.flag, y.episode_done, y.machine_state,
                                                                      y.success)
        assert k == 0 or x.n_steps == y.n_steps
        for name in ("reward", "state", "posture", "episode_return"):
            assert np.asarray(getattr(x, name)).tobytes() == np.asarray(getattr(y, name)).tobytes(), name
    assert skipped.machine.settled_state is None and ran.machine.settled_state is not None


def test_the_machine_still_goes_through_goto_start(runner, caplog):
    assert runner.machine.exact_start and runner.machine.skip_goto_start
    with caplog.at_level(logging.DEBUG, logger="episodic.runtime.machine"):
        reply = runner.send(StartCommand(1, 1, posture=runner.robot.home + 0.3))
    changes = [r.getMessage() for r in caplog.records if r.name == "episodic.runtime.machine"]
    assert changes == ["RESTART -> GOTO_START", "GOTO_START -> WAIT_FOR_START"]
    assert reply.flag == Flag.OK and reply.machine_state == MachineState.WAIT_FOR_START and reply.n_steps == 0
    np.testing.assert_array_equal(runner.sim.q, runner.robot.home + 0.3)
    assert runner.sim.data.time == 0.0 and not runner.sim.data.qvel.any()


def test_a_log_replays_its_go_to_starts_as_they_ran(tmp_path):
    """Skipped: replayed skipped. Simulated, and marked as a log written before the skip is (no
    goto_start): replayed simulated. The mark is what replay goes by: a simulated go-to-start
    marked skipped does not replay."""
    skipped, ran = tmp_path / "skipped.h5", tmp_path / "ran.h5"
    run("reach", True, "after a safety abort", skipped)
    run("reach", False, "after a safety abort", ran)
    assert [ep.attrs["goto_start"] for ep in read_episodes(skipped)] == ["skipped"] * 2
    assert replay(skipped).identical
    assert [ep.attrs["goto_start"] for ep in read_episodes(ran)] == ["ran"] * 2
    set_goto_start(ran, None)
    report = replay(ran)
    assert report.identical and len(report.episodes) == 2
    set_goto_start(ran, "skipped")
    assert {d.what for d in replay(ran).differences} >= {"steps/time", "steps/q"}


def set_goto_start(path: Path, value: str | None) -> None:
    """Set every episode's goto_start attribute in the log at ``path`` (None: remove it, as in
    a log written before it)."""
    with h5py.File(path, "r+") as f:
        rows = f["episodes"][()]
        for k, text in enumerate(rows["attrs"]):
            attrs = json.loads(text)
            attrs.pop("goto_start", None)
            rows["attrs"][k] = json.dumps(attrs if value is None else {**attrs, "goto_start": value})
        f["episodes"][...] = rows


def test_a_driven_robot_still_runs_its_go_to_start():
    with Runner(make_task("reach"), driver=MujocoDriver) as r:
        assert not r.machine.exact_start
        reply = r.send(StartCommand(1, 1, posture=r.robot.clamp(r.robot.home + 0.3)))
        r.send(StartCommand(2, 1))  # ends the first
        assert reply.n_steps > 100 and r.episodes[0].goto_start == "ran"


def test_the_sag_under_a_hanging_ball_is_allowed_and_nothing_else():
    """ball_in_cup's hanging ball and string pull j6 about 3 mrad from the posture under the WAM's
    gains (more than its 2 mrad tolerance_q); reach's arm carries nothing."""
    for task, least, most in (("ball_in_cup", 2.5e-3, 3.5e-3), ("reach", 0.0, 1e-12)):
        with Runner(make_task(task)) as r:
            r.send(StartCommand(1, 1))  # the exact start: the ball hangs still
            sag = carried_sag(r.scene, r.sim.get_state(), r.machine.default_gains())
            assert least <= sag[5] <= most and np.all(np.delete(sag, 5) < 1.1e-3), sag


@pytest.mark.slow
def test_a_go_to_start_under_a_hanging_ball_settles_and_one_logged_before_replays_as_it_ran(tmp_path):
    """The simulated go-to-start to ball_in_cup's posture ends once the arm rests (it held for the
    whole settle_time before, the sag never within tolerance_q); a log written before (the whole
    settle, no goto_start) replays as it ran."""
    steps = {}
    for allow in (True, False):
        with Runner(make_task("ball_in_cup"), log=tmp_path / f"{allow}.h5") as r:
            r.machine.skip_goto_start, r.machine.allow_carried_sag = False, allow
            steps[allow] = r.send(StartCommand(1, 1)).n_steps
    settle = int(round(r.robot.goto.settle_time * r.robot.control_rate))
    assert steps[True] < steps[False] - settle // 2 and steps[False] > settle
    set_goto_start(tmp_path / "False.h5", None)
    assert replay(tmp_path / "False.h5").identical and replay(tmp_path / "True.h5").identical


def test_an_episode_that_ends_at_its_start_has_no_steps_and_the_exports_skip_it(tmp_path):
    path = tmp_path / "run.h5"
    with Runner(make_task("reach"), log=path) as r:
        r.send(StartCommand(1, 1, posture=r.robot.home + 0.3))
        r.send(ResetCommand(1, 1, 1))
        r.send(StartCommand(2, 1))
        r.send(TrajectoryCommand(2, 1, 1, wave(r.robot.home)))
    first, second = read_episodes(path)
    assert first.steps == {} and first.attrs["n_steps"] == 0 and len(second.steps["time"]) == 500
    mrd = export_mrdplot(path, tmp_path / "mrd")
    assert [p.name for p in mrd.files] == ["run_ep000001.mrd"] and "no steps" in mrd.skipped["000000"]
    demos = export_robomimic(path, tmp_path / "rm.hdf5")
    assert "000000" in demos.skipped and len(demos.demos) == 1
