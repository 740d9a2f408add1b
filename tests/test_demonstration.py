"""Demonstrations (episodic.learning.demonstration): the file round trip and its refusals, the motion of a
real run log's episode, the kinesthetic stand-in in real MuJoCo (gravity compensation holds the
arm, the hand follows a moving guide as a spring-damper does), and the ball-in-a-cup
demonstration that misses the cup in the teaching and when a real runner executes it."""
from __future__ import annotations

import h5py
import mujoco
import numpy as np
import pytest
from click.testing import CliRunner
from scipy.spatial.transform import Rotation

from episodic.cli.main import main
from episodic.interface.commands import ResetCommand, StartCommand, TrajectoryCommand
from episodic.interface.robot import load_robot
from episodic.learning.demonstration import (
    DEMO_OFFSET,
    GRADIENT,
    RECORDED,
    BallFlight,
    Demonstration,
    DemonstrationError,
    ball_in_cup_demonstration,
    demonstration_commands,
    from_log,
    hand_inertia,
    kinesthetic,
)
from episodic.logs import read_episodes
from episodic.runtime.runner import Runner
from episodic.runtime.scene import build_scene
from episodic.tasks import make_task
from episodic.tasks.ball_in_cup import BallInCup
from episodic.tasks.ball_in_cup_swing import REFERENCE_SWING
from episodic.tools.batch import evaluate
from tests.helpers import wave

WAM = load_robot("wam")
DT = WAM.control_dt
RIM_MISS = BallInCup.cup_radius + BallInCup.ball_radius  # m: a ball centre farther from the axis misses the cup


def hand_poses(task_name: str, q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The flange's positions (n, 3) m and rotation matrices (n, 3, 3) at postures q (n, n_dofs) rad."""
    scene = build_scene(WAM, make_task(task_name))
    model, data = scene.model, mujoco.MjData(scene.model)
    site = model.site(WAM.end_effector_site).id
    positions, rotations = [], []
    for posture in np.atleast_2d(q):
        data.qpos[scene.qpos_adr] = posture
        mujoco.mj_kinematics(model, data)
        positions.append(data.site_xpos[site].copy())
        rotations.append(data.site_xmat[site].reshape(3, 3).copy())
    return np.array(positions), np.array(rotations)


def a_demonstration(n: int = 50, with_state: bool = True) -> Demonstration:
    rng = np.random.default_rng(7)
    q = rng.normal(size=(n, WAM.n_dofs))
    return Demonstration.from_positions(
        q, DT, qd=rng.normal(size=q.shape), qdd=rng.normal(size=q.shape), robot="wam", task="reach",
        task_params={"tolerance": 0.02, "effort": 1e-7}, joint_names=list(WAM.joint_names), source="test",
        metadata={"seed": 3, "nested": {"a": [1, 2.5, None]}, "pi": np.pi},
        task_state=rng.normal(size=(n, 2)) if with_state else None, state_columns=["x", "y"] if with_state else [])


# -- the file ----------------------------------------------------------------------------------
@pytest.mark.parametrize("with_state", [True, False])
def test_save_and_load_round_trip_bit_exactly(tmp_path, with_state):
    demo = a_demonstration(with_state=with_state)
    back = Demonstration.load(demo.save(tmp_path / "demo.h5"))
    for name in ("t", "q", "qd", "qdd") + (("task_state",) if with_state else ()):
        assert getattr(back, name).dtype == np.float64
        assert getattr(back, name).tobytes() == getattr(demo, name).tobytes(), name
    assert back.state_columns == (["x", "y"] if with_state else []) and (back.task_state is None) != with_state
    for name in ("robot", "task", "task_params", "joint_names", "source", "metadata"):
        assert getattr(back, name) == getattr(demo, name), name
    assert back.metadata["derivatives"] == RECORDED and back.dt == DT and back.duration == 49 * DT
    with h5py.File(tmp_path / "demo.h5", "r") as f:  # the documented layout, as any HDF5 reader sees it
        assert f.attrs["format"] == "episodic-demonstration" and f.attrs["format_version"] == 1
        assert list(f.attrs["joint_names"]) == list(WAM.joint_names) and f["q"].shape == (50, 7)


def test_save_refuses_an_existing_file_unless_asked(tmp_path):
    path = a_demonstration().save(tmp_path / "demo.h5")
    with pytest.raises(FileExistsError, match="exists; choose another path, or overwrite"):
        a_demonstration().save(path)
    a_demonstration(n=20).save(path, overwrite=True)
    assert len(Demonstration.load(path).t) == 20


def test_load_of_a_file_that_is_not_a_demonstration_says_which_and_why(tmp_path):
    text = tmp_path / "notes.h5"
    text.write_text("not hdf5")
    with pytest.raises(DemonstrationError, match=f"{text} is not a demonstration: not an HDF5 file"):
        Demonstration.load(text)
    with pytest.raises(FileNotFoundError, match="missing.h5: no such file"):
        Demonstration.load(tmp_path / "missing.h5")
    log = tmp_path / "run.h5"
    with Runner(make_task("reach"), log=log):
        pass
    with pytest.raises(DemonstrationError, match=r"run.h5 is not a demonstration: its format attribute is "
                                                 r"'episodic-log/2'.*episodic demonstrate --from-log"):
        Demonstration.load(log)
    path = a_demonstration().save(tmp_path / "demo.h5")
    with h5py.File(path, "a") as f:
        f.attrs["format_version"] = 2
    with pytest.raises(DemonstrationError, match="format_version 2; this version of episodic reads format_version 1"):
        Demonstration.load(path)
    path = a_demonstration().save(tmp_path / "damaged.h5")
    with h5py.File(path, "a") as f:
        del f["qd"]
    with pytest.raises(DemonstrationError, match="damaged.h5 is a damaged demonstration: it lacks /qd"):
        Demonstration.load(path)
    path = a_demonstration().save(tmp_path / "short.h5")
    with h5py.File(path, "a") as f:
        data = f["qdd"][:-1]
        del f["qdd"]
        f["qdd"] = data
    with pytest.raises(DemonstrationError, match=r"short.h5 is a damaged demonstration: .*'qdd': \(49, 7\)"):
        Demonstration.load(path)


def test_missing_derivatives_are_numpy_gradients_accurate_to_their_truncation_error():
    """qd of q = sin(w t) by central differences: error w^3 dt^2 / 6 at most inside (Taylor)."""
    w, n = 3.0, 400
    t = np.arange(n) * DT
    q = np.tile(np.sin(w * t)[:, None], (1, WAM.n_dofs))
    demo = Demonstration.from_positions(q, DT, robot="wam", task="reach", task_params={},
                                        joint_names=list(WAM.joint_names), source="sin")
    assert demo.metadata["derivatives"] == GRADIENT
    inside = slice(1, -1)
    assert np.max(np.abs(demo.qd[inside, 0] - w * np.cos(w * t[inside]))) <= w**3 * DT**2 / 6 * 1.001
    assert np.max(np.abs(demo.qdd[2:-2, 0] + w**2 * np.sin(w * t[2:-2]))) <= w**4 * DT**2 / 3 * 1.001


# -- from a log ----------------------------------------------------------------------------------
def test_from_log_takes_exactly_the_logged_motion_of_an_episode(tmp_path):
    path = tmp_path / "run.h5"
    with Runner(make_task("reach"), log=path, seed=5) as runner:
        runner.machine.skip_goto_start = False  # the go-to-start simulated and logged (episodic.runtime.start)
        start = runner.robot.home + 0.05  # away from where the runner starts: the go-to-start moves
        runner.send(StartCommand(1, 2, posture=start, context=np.array([0.5, 0.2, 1.5])))
        runner.send(TrajectoryCommand(1, 1, 2, wave(start, 300)))
        runner.send(TrajectoryCommand(1, 2, 2, np.repeat(start[None], 200, axis=0), wait_time=0.1))
        runner.send(StartCommand(2, 1))
        runner.send(ResetCommand(2))  # an episode without motion
    (logged,) = read_episodes(path, [0])
    steps = logged.steps
    motion = steps["index"] >= 1
    first = np.flatnonzero(motion)[0]
    assert first > 0 and motion[first:].all()  # the go-to-start's steps come first, then only motion
    demo = from_log(path, 0)
    assert len(demo.t) == motion.sum() == 300 + 200 + 50
    np.testing.assert_array_equal(demo.q, steps["q"][motion])
    np.testing.assert_array_equal(demo.qd, steps["qd"][motion])
    np.testing.assert_array_equal(demo.qdd, steps["qdd"][motion])
    np.testing.assert_array_equal(demo.task_state, steps["task_state"][motion])
    np.testing.assert_array_equal(demo.t, np.arange(len(demo.t)) * DT)
    assert steps["time"][motion][0] == 0.0  # the log's motion time starts at 0 as well
    assert (demo.robot, demo.task, demo.joint_names) == ("wam", "reach", list(WAM.joint_names))
    assert demo.task_params == make_task("reach").params() and demo.state_columns == list(make_task("reach").columns)
    assert demo.source == f"log {path} episode 0" and demo.metadata["seed"] == 5
    assert demo.metadata["derivatives"] == RECORDED and demo.metadata["flag"] == "OK"
    with pytest.raises(DemonstrationError, match=f"episode 1 of {path} has 0 motion steps.*ABORTED_BY_LEARNER"):
        from_log(path, 1)
    with pytest.raises(DemonstrationError, match="cannot take episode 9 of .*has no episode 000009"):
        from_log(path, 9)


# -- kinesthetic teaching --------------------------------------------------------------------------
@pytest.mark.parametrize("task_name", ["reach", "ball_in_cup"])
def test_a_guide_holding_still_holds_the_arm_still(task_name):
    """Gravity compensation carries the arm (and the cup): held at its start pose by the teacher,
    the hand moves less than 1 mm in 1 s (on ball_in_cup the teacher also carries the hanging
    ball, 0.25 N: 0.12 mm at 2000 N/m)."""
    task = make_task(task_name)
    start = task.start_posture(WAM)
    (p0,), (r0,) = hand_poses(task_name, start)
    demo = kinesthetic(task, WAM, lambda t: (p0, r0), 1.0)
    positions, _ = hand_poses(task_name, demo.q)
    assert len(demo.t) == 500 and np.max(np.linalg.norm(positions - p0, axis=1)) < 1e-3
    assert np.max(np.abs(demo.q - start)) < 2e-3


def test_without_a_teacher_gravity_compensation_alone_holds_the_bare_arm():
    start = make_task("reach").start_posture(WAM)
    demo = kinesthetic("reach", WAM, lambda t: (np.zeros(3), np.eye(3)), 1.0, stiffness=0.0)
    assert np.max(np.abs(demo.q - start)) < 1e-9 and np.max(np.abs(demo.qd)) < 1e-9


def test_the_hand_follows_a_moving_guide_as_a_spring_damper_does():
    """The guide moves the hand 0.1 m sideways and turns it 0.2 rad about the vertical, both
    along a 1 s minimum-jerk profile (peak acceleration 10 / sqrt(3) x 0.1 m/s^2 = 0.58 m/s^2).
    A critically damped spring-damper K = 2000 N/m that drags a mass of at most 5.5 kg lags
    by m a / K = 1.6 mm at most, and far less once the guide stops: the tolerances are 2 mm
    and 0.01 rad while it moves and 0.2 mm and 2 mrad 0.5 s after."""
    start = make_task("reach").start_posture(WAM)
    (p0,), (r0,) = hand_poses("reach", start)

    def guide(t: float) -> tuple[np.ndarray, np.ndarray]:
        x = min(max(t, 0.0), 1.0)
        s = 10 * x**3 - 15 * x**4 + 6 * x**5
        return p0 + s * np.array([0.0, 0.1, 0.0]), Rotation.from_rotvec([0.0, 0.0, 0.2 * s]).as_matrix() @ r0

    demo = kinesthetic("reach", WAM, guide, 1.5)
    positions, rotations = hand_poses("reach", demo.q)
    goals = [guide(t) for t in demo.t]
    lag = np.linalg.norm(positions - np.array([p for p, _ in goals]), axis=1)
    turn = np.linalg.norm(Rotation.from_matrix(np.array([r for _, r in goals])
                                               @ np.transpose(rotations, (0, 2, 1))).as_rotvec(), axis=1)
    assert np.max(lag) < 2e-3 and np.max(turn) < 0.01
    assert lag[-1] < 2e-4 and turn[-1] < 2e-3
    assert np.linalg.norm(positions[-1] - p0) == pytest.approx(0.1, abs=2e-4)  # it did move
    np.testing.assert_allclose(demo.qdd[:-1] * DT, np.diff(demo.qd, axis=0), atol=1e-12)  # mean accelerations
    assert demo.metadata["guide_error_max"] == pytest.approx(np.max(lag), rel=0.2)


def test_hand_inertia_is_what_forward_dynamics_shows_at_the_hand():
    """The operational-space inertia by its definition: a wrench w on the hand of an arm at rest
    changes the hand's acceleration by (J M^-1 J^T) w, the inverse of that inertia. Measured with
    MuJoCo's forward dynamics, one unit force and torque at a time (joint friction off, so that
    the constraint solver passes the wrench on whole)."""
    task = make_task("ball_in_cup")
    scene = build_scene(WAM, task)
    start = task.start_posture(WAM)
    mass, inertia = hand_inertia(scene, start)
    model = scene.dynamics
    model.opt.disableflags |= mujoco.mjtDisableBit.mjDSBL_FRICTIONLOSS
    data = mujoco.MjData(model)
    data.qpos[:] = start
    mujoco.mj_forward(model, data)
    jac = np.zeros((6, model.nv))
    mujoco.mj_jacSite(model, data, jac[:3], jac[3:], model.site(WAM.end_effector_site).id)
    free = jac @ data.qacc
    response = np.empty((6, 6))
    for i, wrench in enumerate(np.eye(6)):
        data.qfrc_applied[:] = jac.T @ wrench
        mujoco.mj_forward(model, data)
        response[:, i] = jac @ data.qacc - free
    spatial = np.linalg.inv(response)
    assert mass == pytest.approx(np.linalg.det(spatial[:3, :3]) ** (1 / 3), rel=1e-6)
    assert inertia == pytest.approx(np.linalg.det(spatial[3:, 3:]) ** (1 / 3), rel=1e-6)
    assert 1.8 < mass < 5.5  # between the smallest and largest principal masses of the notes


# -- ball in a cup -----------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def taught() -> Demonstration:
    return ball_in_cup_demonstration()


@pytest.fixture(scope="module")
def executed(taught):
    """The demonstration executed by a fresh runner: its result and ball flight (motion steps)."""
    (result,) = evaluate([demonstration_commands(taught, WAM)], "ball_in_cup", WAM, keep_steps=True)
    steps = result.steps
    state = steps["task_state"][steps["index"] >= 1]
    column = BallInCup.columns.index
    flight = BallFlight.of(np.arange(len(state)) * DT, state[:, column("height")], state[:, column("radial")],
                           state[:, column("caught")])
    return result, flight


def test_the_ball_in_cup_demonstration_misses_by_centimetres_while_taught(taught):
    flight = BallFlight.of_demonstration(taught)
    assert not flight.caught and flight.max_height > 0.02  # the ball rose above the rim
    t, radial = flight.crossings[-1]
    assert RIM_MISS < radial < 0.35 and 1.5 < t < taught.duration  # and came down beside the cup
    assert taught.metadata["guide_error_max"] < 0.02  # the teacher's hand kept within 2 cm of the swing's path
    assert taught.metadata["offset"] == DEMO_OFFSET and taught.metadata["swing_step"] == REFERENCE_SWING.step
    assert taught.duration == pytest.approx(REFERENCE_SWING.duration + 1.0, abs=DT)
    assert taught.robot == "wam" and taught.task == "ball_in_cup" and taught.metadata["derivatives"] == RECORDED


def test_the_ball_in_cup_demonstration_executed_by_the_runner_catches_at_this_string(taught, executed):
    """Taught, the ball misses (above); the recording executed by the runner, under its PD gains
    rather than the teacher's spring, catches at the 5 kN/m string (episodic/learning/demonstration.py:
    return 3.99), while the DMP imitation PoWER starts from misses (tests/test_cli.py's demo)."""
    result, flight = executed
    assert result.flag.name == "OK" and result.success and flight.caught
    assert flight.max_height > 0.02
    assert result.episode_return == pytest.approx(3.99, abs=0.05)


def test_demonstration_commands_send_the_recording(taught):
    commands = demonstration_commands(taught, WAM, episode_id=4, segments=3, wait=0.5)
    start, *segments = commands
    assert isinstance(start, StartCommand) and start.max_commands == 3 and start.episode_id == 4
    np.testing.assert_array_equal(start.posture, taught.q[0])
    for name in ("q", "qd", "qdd"):
        # the first sample is the start
        np.testing.assert_array_equal(np.vstack([getattr(c, name) for c in segments]), getattr(taught, name)[1:])
    assert [c.index for c in segments] == [1, 2, 3] and [c.wait_time for c in segments] == [0.0, 0.0, 0.5]
    assert all(c.rate is None for c in segments)
    with pytest.raises(ValueError, match="recorded on the robot 'wam'.*not on 'puma560'"):
        demonstration_commands(taught, "puma560")


def test_the_ball_in_cup_demonstration_is_deterministic(taught):
    again = ball_in_cup_demonstration()
    for name in ("t", "q", "qd", "qdd", "task_state"):
        assert getattr(again, name).tobytes() == getattr(taught, name).tobytes(), name


# -- the command line -------------------------------------------------------------------------------
def test_cli_demonstrate_writes_loadable_files(tmp_path, taught):
    out = tmp_path / "demo.h5"
    result = CliRunner().invoke(main, ["demonstrate", "ball_in_cup", "--out", str(out)], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    flight = BallFlight.of_demonstration(taught)
    assert result.output.startswith(f"{out}: {len(taught.t)} steps, {taught.duration:.3f} s at 500 Hz")
    assert f"came down {flight.crossings[-1, 1]:.3f} m from the cup's axis" in result.output
    loaded = Demonstration.load(out)
    assert loaded.q.tobytes() == taught.q.tobytes() and loaded.source == taught.source

    again = CliRunner().invoke(main, ["demonstrate", "ball_in_cup", "--out", str(out)])
    assert again.exit_code == 1 and "exists; choose another --out, or replace it with --overwrite" in again.output

    log = tmp_path / "run.h5"
    with Runner(make_task("reach"), log=log) as runner:
        runner.send(StartCommand(1, 1))
        runner.send(TrajectoryCommand(1, 1, 1, wave(runner.robot.home, 100)))
    out = tmp_path / "from_log.h5"
    result = CliRunner().invoke(main, ["demonstrate", "--from-log", str(log), "--episode", "0", "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert result.output == f"{out}: 100 steps, 0.198 s at 500 Hz, task reach on wam, log {log} episode 0\n"
    np.testing.assert_array_equal(Demonstration.load(out).q, from_log(log, 0).q)

    for args, message in ((["--out", str(out)], "give either a TASK"),
                          (["reach", "--out", str(out)], "scripted teacher for ball_in_cup only"),
                          (["--from-log", str(log), "--seed", "1", "--out", str(out)], "takes none of them"),
                          (["--from-log", str(out), "--out", str(tmp_path / "x.h5")], "is not an episodic log")):
        refused = CliRunner().invoke(main, ["demonstrate", *args])
        assert refused.exit_code != 0 and message in refused.output
