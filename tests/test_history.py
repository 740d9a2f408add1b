"""History-independent episodes: in blocking simulation an episode depends only on its own
commands, the task, the seed and the software versions, not on the episodes run before it
(episodic.runtime.machine: the exact start after GOTO_START). The same reference episode is run first,
after 10 random episodes and after aborted ones; its log from WAIT_FOR_START on is compared bit
for bit."""
from __future__ import annotations

import numpy as np
import pytest

from episodic.interface.commands import GainsCommand, StartCommand, TrajectoryCommand
from episodic.interface.vocabulary import Flag, MachineState
from episodic.logs import read_episodes
from episodic.runtime.backend import MujocoDriver
from episodic.runtime.runner import Runner
from episodic.tasks import make_task
from episodic.tasks.ball_in_cup_swing import reference_commands as ball_in_cup_reference
from episodic.tools.replay import replay
from tests.helpers import wave

# pole_balancing: the joint gains of examples/pole_balancing_reference.py and its task gains
# for the 0.5 m pole (balance, then energy swing-up), rounded
POLE_KP = np.array([400, 600, 200, 200, 100, 100, 0.0])
POLE_KD = np.array([10, 60, 7, 12, 0.95, 0.95, 0.0])
POLE_TASK_GAINS = np.array([1.70, 0.357, 1.62, 0.545, 0.06, 0.2, 0.6, 2.2])
HISTORY = ("first", "after 10 random", "after a safety abort", "after a refused segment",
           "after a new start mid-episode")


def reference(runner: Runner, episode_id: int) -> list:
    """The episode compared: a few segments that start from the task's start posture."""
    robot, task = runner.robot, runner.task.name
    if task == "ball_in_cup":
        return ball_in_cup_reference(robot, episode_id)  # the catching swing: 3 segments, 3.15 s
    if task == "pole_balancing":
        start = runner.task.start_posture(robot)
        nudge = np.repeat(start[None], 150, axis=0)
        nudge[:, 3] += 0.1 * np.sin(np.pi * np.arange(1, 151) / 150)  # bump the elbow, 0.3 s
        return [StartCommand(episode_id, 2, context=np.array([np.pi - 0.2, 0.0])),
                TrajectoryCommand(episode_id, 1, 2, nudge),
                GainsCommand(episode_id, 2, 2, POLE_KP, POLE_KD, wait_time=1.5, task_gains=POLE_TASK_GAINS)]
    home = robot.home
    return [StartCommand(episode_id, 3, context=np.array([0.3, 0.4, 1.4])),
            TrajectoryCommand(episode_id, 1, 3, wave(home, amplitude=0.3)),
            GainsCommand(episode_id, 2, 3, robot.kp * 0.5, robot.kd * 0.5, ki=np.full(7, 2.0), wait_time=0.1,
                         feedforward="inverse_dynamics"),
            TrajectoryCommand(episode_id, 3, 3, wave(home, amplitude=0.2, phase=0.4), wait_time=0.2)]


def random_context(task: str, rng: np.random.Generator) -> np.ndarray:
    if task == "reach":
        return np.array([0.0, 0.45, 1.55]) + rng.uniform(-0.2, 0.2, 3)
    if task == "ball_in_cup":
        return rng.uniform(-0.15, 0.15, 2)
    return np.array([np.pi + rng.uniform(-0.6, 0.6), rng.uniform(-1.0, 1.0)])


def random_episode(runner: Runner, rng: np.random.Generator, episode_id: int) -> None:
    """An episode of random commands: a start at a random posture near the task's with a random
    context, maybe a random gain set, a random segment from the posture reached."""
    robot, task = runner.robot, runner.task.name
    posture = robot.clamp(runner.task.start_posture(robot) + rng.uniform(-0.3, 0.3, robot.n_dofs))
    start = runner.send(StartCommand(episode_id, 2, posture=posture, context=random_context(task, rng)))
    if start.episode_done:
        return
    if rng.random() < 0.5:
        scale = rng.uniform(0.3, 1.5)
        task_gains = POLE_TASK_GAINS * rng.uniform(0.5, 1.5) if task == "pole_balancing" else None
        runner.send(GainsCommand(episode_id, 1, 2, robot.kp * scale, robot.kd * scale,
                                 ki=np.full(7, rng.uniform(0, 5)), wait_time=rng.uniform(0, 0.2),
                                 feedforward=str(rng.choice(["gravity_compensation", "feedforward",
                                                             "inverse_dynamics"])), task_gains=task_gains))
    else:
        runner.send(TrajectoryCommand(episode_id, 1, 2, wave(start.posture, n=int(rng.integers(100, 400)),
                                                             amplitude=rng.uniform(0.05, 0.3))))
    if not runner.last_reply.episode_done:
        runner.send(TrajectoryCommand(episode_id, 2, 2, wave(runner.last_reply.posture, n=int(rng.integers(100, 300)),
                                                             amplitude=rng.uniform(0.05, 0.3)),
                                      wait_time=rng.uniform(0, 0.3)))


def before(runner: Runner, history: str) -> int:
    """Run ``history`` on ``runner``; the next episode id."""
    robot, rng = runner.robot, np.random.default_rng(7)
    if history == "after 10 random":
        for k in range(10):
            random_episode(runner, rng, 100 + k)
        return 200
    if history == "after a safety abort":
        start = runner.send(StartCommand(100, 2, posture=robot.clamp(robot.home + 0.2)))
        jump = np.repeat(start.posture[None], 400, axis=0)
        jump[10:, 0] += 1.5  # a step on j1: the PD drives it past its velocity limit
        assert runner.send(TrajectoryCommand(100, 1, 2, jump)).flag == Flag.SAFETY_ABORT
        return 200
    if history == "after a refused segment":
        start = runner.send(StartCommand(100, 2, posture=robot.clamp(robot.home - 0.2)))
        assert runner.send(TrajectoryCommand(100, 1, 2, wave(start.posture, amplitude=0.15))).flag == Flag.OK
        far = wave(runner.last_reply.posture) + 0.5
        assert runner.send(TrajectoryCommand(100, 2, 2, far)).flag == Flag.DISCONTINUOUS
        return 200
    if history == "after a new start mid-episode":  # the reference's start aborts it
        start = runner.send(StartCommand(100, 3, context=random_context(runner.task.name, rng)))
        runner.send(TrajectoryCommand(100, 1, 3, wave(start.posture, n=350, amplitude=0.25)))
        return 200
    return 1


def run_reference(task: str, history: str, exact: bool = True) -> dict:
    """The reference episode of ``task`` after ``history`` on a fresh blocking runner: its
    episode, the start reply, the integration state at WAIT_FOR_START, the state the go-to-start
    reached and the start posture."""
    with Runner(make_task(task), seed=3) as runner:
        runner.machine.exact_start = exact
        runner.machine.skip_goto_start = False  # simulated: the states it reaches are compared below
        episode_id = before(runner, history)
        commands = reference(runner, episode_id)
        start = runner.send(commands[0])
        assert start.flag == Flag.OK, start.message
        state = runner.sim.get_state()
        settled = runner.machine.settled_state
        replies = [start] + [runner.send(c) for c in commands[1:]]
        assert replies[-1].episode_done, replies[-1].message
        episode = runner.episodes[-1]
        assert episode.episode_id == episode_id
        posture = runner.task.start_posture(runner.robot) if commands[0].posture is None else commands[0].posture
        return dict(episode=episode, start=start, replies=replies, state=state, settled=settled,
                    posture=posture, scene=runner.scene)


def from_wait_for_start(steps: dict) -> dict:
    """The per-step columns from WAIT_FOR_START on (after the GOTO_START rows, which come first)."""
    goto = steps["machine_state"] == MachineState.GOTO_START
    n = int(np.argmin(goto)) if not goto.all() else len(goto)
    assert not goto[n:].any()
    return {name: values[n:] for name, values in steps.items()}


def assert_identical(a: dict, b: dict) -> None:
    sa, sb = from_wait_for_start(a["episode"].steps()), from_wait_for_start(b["episode"].steps())
    assert sa.keys() == sb.keys()
    assert len(sa["time"]) > 500
    for name in sa:
        assert sa[name].tobytes() == sb[name].tobytes(), name
    ta, tb = a["episode"].segment_table(), b["episode"].segment_table()
    for name in ta:
        assert ta[name].tobytes() == tb[name].tobytes(), name
    assert np.float64(a["episode"].episode_return).tobytes() == np.float64(b["episode"].episode_return).tobytes()
    assert a["episode"].flag == b["episode"].flag and a["episode"].success == b["episode"].success
    assert a["state"].tobytes() == b["state"].tobytes()  # the whole mjSTATE_INTEGRATION at WAIT_FOR_START
    for k, (ra, rb) in enumerate(zip(a["replies"], b["replies"], strict=True)):
        assert (ra.flag, ra.episode_done) == (rb.flag, rb.episode_done)
        assert k == 0 or ra.n_steps == rb.n_steps  # the start's: the go-to-start's steps, which differ
        assert np.float64(ra.reward).tobytes() == np.float64(rb.reward).tobytes()
        assert ra.state.tobytes() == rb.state.tobytes() and ra.posture.tobytes() == rb.posture.tobytes()


@pytest.mark.parametrize("task", ["reach", pytest.param("ball_in_cup", marks=pytest.mark.slow), "pole_balancing"])
def test_the_same_episode_is_bit_identical_whatever_ran_before(task):
    runs = {history: run_reference(task, history) for history in HISTORY}
    first = runs["first"]
    assert first["episode"].flag == Flag.OK
    if task == "ball_in_cup":
        assert first["episode"].success  # the reference catches, wherever it runs
    for run in runs.values():
        assert_identical(first, run)
    # the failure mode the exact start removes: the go-to-starts ended in different states, not
    # exactly at the start posture nor at rest
    scene = first["scene"]
    settled = {history: run["settled"] for history, run in runs.items()}
    assert len({s.tobytes() for s in settled.values()}) > 1
    after = settled["after 10 random"]
    q = scene.qpos(after[None])[0, scene.qpos_adr]
    qd = scene.qvel(after[None])[0, scene.dof_adr]
    assert np.any(q != first["posture"]) and np.any(qd != 0.0)
    assert after[0] > 1.0  # and late: time went on through the episodes before


@pytest.mark.parametrize("task", ["reach", "pole_balancing"])
def test_without_the_exact_start_the_episode_depends_on_what_ran_before(task):
    """What the comparison above would see without the exact start (the machine's switch off):
    the same episode after 10 random ones differs from the first."""
    first, after = (run_reference(task, history, exact=False) for history in ("first", "after 10 random"))
    sa, sb = from_wait_for_start(first["episode"].steps()), from_wait_for_start(after["episode"].steps())
    assert sa["q"].tobytes() != sb["q"].tobytes()
    assert first["episode"].episode_return != after["episode"].episode_return


def test_time_counts_from_the_exact_start_and_the_start_is_exact(runner):
    """The start reply finds the robot exactly at the posture, at rest, at time 0, the integral
    term 0; GOTO_START's steps are logged before time 0, the motion from 0 on."""
    robot = runner.robot
    runner.machine.skip_goto_start = False  # the go-to-start simulated (episodic.runtime.start)
    rng = np.random.default_rng(1)
    random_episode(runner, rng, 1)
    posture = robot.clamp(robot.home + np.array([0.2, -0.1, 0.1, 0.2, 0.0, 0.1, 0.0]))
    start = runner.send(StartCommand(2, 1, posture=posture))
    np.testing.assert_array_equal(runner.sim.q, posture)
    np.testing.assert_array_equal(start.posture, posture)
    assert not runner.sim.data.qvel.any() and not runner.sim.data.qacc_warmstart.any()
    assert runner.sim.data.time == 0.0 and not runner.sim.controller.integral.any()
    settled = runner.machine.settled_state
    assert settled[0] > 0 and np.any(runner.scene.qpos(settled[None])[0, runner.scene.qpos_adr] != posture)
    runner.send(TrajectoryCommand(2, 1, 1, wave(posture)))
    steps = runner.episodes[-1].steps()
    t, goto = steps["time"], steps["machine_state"] == MachineState.GOTO_START
    assert goto.any() and np.all(t[goto] < 0) and t[~goto][0] == 0.0
    assert np.all(np.diff(t) > 0)
    assert t[goto][-1] == pytest.approx(-robot.control_dt, abs=1e-9)


@pytest.mark.serial
def test_realtime_and_a_driven_robot_start_where_the_go_to_start_ended():
    """No exact start off a blocking simulation: a real robot cannot be put anywhere, and the
    realtime stand-in keeps its behaviour (tests/test_realtime.py)."""
    with Runner(make_task("reach"), mode="realtime") as r:
        assert not r.machine.exact_start and r.metadata()["start"] == "reached"
    with Runner(make_task("reach")) as r:
        assert r.machine.exact_start and r.metadata()["start"] == "exact"
    with Runner(make_task("reach"), driver=MujocoDriver) as r:
        assert not r.machine.exact_start
        posture = r.robot.clamp(r.robot.home + 0.3)
        assert r.send(StartCommand(1, 1, posture=posture)).flag == Flag.OK
        assert r.machine.settled_state is None
        assert np.any(r.sim.q != posture) and r.sim.data.time > 1.0  # close and slow, time runs on
        np.testing.assert_allclose(r.sim.q, posture, atol=r.robot.goto.tolerance_q)


def test_a_log_with_history_replays_bit_identically(tmp_path):
    path = tmp_path / "history.h5"
    rng = np.random.default_rng(2)
    with Runner(make_task("reach"), log=path, seed=5) as runner:
        for k in range(3):
            random_episode(runner, rng, 1 + k)
        next_id = before(runner, "after a safety abort")
        for command in reference(runner, next_id):
            runner.send(command)
    episodes = read_episodes(path)
    assert len(episodes) == 5 and episodes[3].attrs["flag"] == Flag.SAFETY_ABORT
    report = replay(path)
    assert report.identical, report.differences
    assert len(report.episodes) == 5
