"""The Unimation PUMA 560 model (robots/puma560/puma560.xml), its settings (robots/puma560/robot.toml)
and the runner on it.

Real MuJoCo, real runners, no mocks. The reference model is the published one: Corke &
Armstrong-Helouvry, "A search for consensus among model parameters reported for the PUMA 560
robot", ICRA 1994, as Peter Corke's Robotics Toolbox states it (mdl_puma560.m and
models/DH/Puma560.py: standard DH table, masses, centres of mass, inertias, motor inertia Jm, gear
ratios G, motor friction B and Tc, joint limits qlim). The tests compute that model's kinematics,
gravity torques and mass matrix here, from the DH table, independently of MuJoCo, and compare them
with the MJCF model; they also check the toolbox's own printed numbers (its unit tests,
unit_test/SerialLinkTest.m of robotics-toolbox-matlab: gravload and inertia at two postures).
"""
from __future__ import annotations

import math
import shutil
import subprocess
import sys

import mujoco
import numpy as np
import pytest
from click.testing import CliRunner

import episodic.interface.robot as robot_module
from episodic.bridge import Client
from episodic.cli.main import main as cli_main
from episodic.interface.commands import StartCommand, TrajectoryCommand
from episodic.interface.robot import RobotError, load_robot
from episodic.interface.trajectory import min_jerk
from episodic.interface.vocabulary import Flag
from episodic.runtime.runner import Runner
from episodic.runtime.scene import build_scene
from episodic.task import TaskError
from episodic.tasks import make_task
from tests.helpers import ROOT, Served, channel_name, posed, wave

PI = math.pi
JOINTS = ("j1", "j2", "j3", "j4", "j5", "j6")
LINKS = tuple(f"puma_link{i}" for i in range(1, 7))

# -- the published model (Corke & Armstrong-Helouvry 1994, as in the Robotics Toolbox) ---------------
DH_A = (0.0, 0.4318, 0.0203, 0.0, 0.0, 0.0)          # m
DH_D = (0.0, 0.0, 0.15005, 0.4318, 0.0, 0.0)         # m
DH_ALPHA = (PI / 2, 0.0, -PI / 2, PI / 2, -PI / 2, 0.0)
MASS = (0.0, 17.4, 4.8, 0.82, 0.34, 0.09)            # kg
COM = ((0, 0, 0), (-0.3638, 0.006, 0.2275), (-0.0203, -0.0141, 0.070), (0, 0.019, 0), (0, 0, 0),
       (0, 0, 0.032))                                # m, in DH frame {k}
INERTIA = ((0, 0.35, 0), (0.13, 0.524, 0.539), (0.066, 0.086, 0.0125), (1.8e-3, 1.3e-3, 1.8e-3),
           (0.3e-3, 0.4e-3, 0.3e-3), (0.15e-3, 0.15e-3, 0.04e-3))  # kg m^2 about the COM, frame {k} axes
JM = (200e-6, 200e-6, 200e-6, 33e-6, 33e-6, 33e-6)   # kg m^2, motor
GEAR = (-62.6111, 107.815, -53.7063, 76.0364, 71.923, 76.686)
B_MOTOR = (1.48e-3, 0.817e-3, 1.38e-3, 71.2e-6, 82.6e-6, 36.7e-6)  # N m s/rad, motor
TC_MOTOR = ((0.395, -0.435), (0.126, -0.071), (0.132, -0.105), (11.2e-3, -16.9e-3), (9.26e-3, -14.5e-3),
            (3.96e-3, -10.5e-3))                     # N m, motor, [Tc+, Tc-]
QLIM_DEG = ((-160, 160), (-45, 225), (-225, 45), (-110, 170), (-100, 100), (-266, 266))
QN = (0.0, PI / 4, PI, 0.0, PI / 4, 0.0)             # the toolbox's nominal posture
# the MJCF's one deliberate change: link 3's moment about z3, 0.0125 -> 0.0200 (triangle inequality)
LINK3_IZZ_MODEL = 0.0200
# Armstrong, Khatib & Burdick 1986, maximum joint torques, N m
TORQUE_MAX = (97.6, 186.4, 89.4, 24.2, 20.1, 21.3)
# Corke 1996 (Visual Control of Robots), motor speeds at which the drives saturate, rad/s at the motor
MOTOR_SPEED = (120, 163, 129, 406, 366, 440)
# the toolbox's unit tests (SerialLinkTest.m): gravload and inertia, 4 decimals, checked there to 1e-4
PRINTED_POSTURES = ((0, PI / 4, -PI, 1, PI / 4, 0), (0, PI / 2, -PI, 1, PI / 2, 0))
PRINTED_GRAVLOAD = ((0.0, 31.6334, 6.0286, -0.0119, 0.0218, 0.0), (0.0, 7.7198, 8.7439, -0.0238, 0.0, 0.0))
PRINTED_INERTIA = (
    ((3.6591, -0.4042, 0.1013, -0.0021, -0.0015, 0.0), (-0.4042, 4.4128, 0.3504, -0.0008, 0.0017, 0.0),
     (0.1013, 0.3504, 0.9377, -0.0008, 0.0008, 0.0), (-0.0021, -0.0008, -0.0008, 0.1925, 0.0, 0.0),
     (-0.0015, 0.0017, 0.0008, 0.0, 0.1713, 0.0), (0.0, 0.0, 0.0, 0.0, 0.0, 0.1941)),
    ((2.6621, -0.6880, 0.0035, -0.0007, -0.0010, 0.0), (-0.6880, 4.4114, 0.3487, -0.0010, 0.0015, 0.0),
     (0.0035, 0.3487, 0.9359, -0.0010, 0.0003, 0.0), (-0.0007, -0.0010, -0.0010, 0.1926, 0.0, 0.0),
     (-0.0010, 0.0015, 0.0003, 0.0, 0.1713, 0.0), (0.0, 0.0, 0.0, 0.0, 0.0, 0.1941)),
)
PRINTED_TOLERANCE = 1e-4
GRAVITY = 9.81  # m/s^2, the toolbox's and MuJoCo's default

# -- where this model puts it ------------------------------------------------------------------------
PEDESTAL = 0.75                    # m, mounting surface above the floor (this model's choice)
SHOULDER = PEDESTAL + 0.672        # m, the toolbox's d1 "from mounting surface to shoulder axis"
REACH_DEFAULT_TARGET = np.array([0.0, 0.45, 1.55])  # m, tasks/reach.py


@pytest.fixture(scope="module")
def puma():
    return load_robot("puma560")


@pytest.fixture(scope="module")
def model(puma):
    return mujoco.MjModel.from_xml_path(str(puma.mjcf))


def _body_ids(model):
    return [model.body(name).id for name in LINKS]


def _joint_ids(model):
    return [model.joint(name).id for name in JOINTS]


# -- the published model, computed here ----------------------------------------------------------
def dh_frames(q) -> list[np.ndarray]:
    """World poses (4 x 4) of DH frames {0}..{6} at posture q: frame {0} at the shoulder,
    unrotated, SHOULDER m above the floor; T_k = T_(k-1) Rz(q_k) Tz(d_k) Tx(a_k) Rx(alpha_k)."""
    pose = np.eye(4)
    pose[2, 3] = SHOULDER
    frames = [pose]
    for k in range(6):
        ct, st = math.cos(q[k]), math.sin(q[k])
        ca, sa = math.cos(DH_ALPHA[k]), math.sin(DH_ALPHA[k])
        step = np.array([[ct, -st * ca, st * sa, DH_A[k] * ct],
                         [st, ct * ca, -ct * sa, DH_A[k] * st],
                         [0.0, sa, ca, DH_D[k]],
                         [0.0, 0.0, 0.0, 1.0]])
        pose = pose @ step
        frames.append(pose)
    return frames


def _link_jacobians(frames, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Linear (3 x 6) Jacobian of link k's centre of mass and angular (3 x 6) Jacobian of link k."""
    com = frames[k + 1][:3, :3] @ np.array(COM[k]) + frames[k + 1][:3, 3]
    jv, jw = np.zeros((3, 6)), np.zeros((3, 6))
    for i in range(k + 1):
        axis, origin = frames[i][:3, 2], frames[i][:3, 3]
        jv[:, i] = np.cross(axis, com - origin)
        jw[:, i] = axis
    return jv, jw


def published_gravity(q) -> np.ndarray:
    """Joint torques (6,) N m that hold the published model still at q (Jacobian-transpose sum of
    the links' weights)."""
    frames = dh_frames(q)
    tau = np.zeros(6)
    for k in range(6):
        jv, _ = _link_jacobians(frames, k)
        tau += jv.T @ np.array([0.0, 0.0, MASS[k] * GRAVITY])
    return tau


def published_mass_matrix(q, link3_izz: float = INERTIA[2][2]) -> np.ndarray:
    """The published model's joint-space inertia (6 x 6) kg m^2 at q, the motors' Jm G^2 included
    (composite sum over the links of m Jv'Jv + Jw' R I R' Jw)."""
    frames = dh_frames(q)
    mass = np.diag(np.array(JM) * np.array(GEAR) ** 2)
    for k in range(6):
        jv, jw = _link_jacobians(frames, k)
        inertia = np.diag(INERTIA[k]).astype(float)
        if k == 2:
            inertia[2, 2] = link3_izz
        rot = frames[k + 1][:3, :3]
        mass += MASS[k] * jv.T @ jv + jw.T @ rot @ inertia @ rot.T @ jw
    return mass


def random_postures(robot, n: int = 100, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).uniform(robot.range_lower, robot.range_upper, size=(n, 6))


# ---------------------------------------------------------------- settings vs. model and sources


def test_settings_load(puma):
    assert puma.name == "puma560" and puma.n_dofs == 6
    assert puma.joint_names == JOINTS and puma.end_effector_site == "ee"
    assert puma.mjcf.is_file() and puma.mjcf.name == "puma560.xml"
    assert puma.control_rate == 500.0 and puma.substeps == 1
    assert puma.feedforward == "gravity_compensation"
    assert "PUMA 560" in puma.description
    np.testing.assert_allclose(puma.range_lower, np.radians([lo for lo, _ in QLIM_DEG]), rtol=0, atol=1e-7)
    np.testing.assert_allclose(puma.range_upper, np.radians([hi for _, hi in QLIM_DEG]), rtol=0, atol=1e-7)
    np.testing.assert_allclose(puma.torque_limit, TORQUE_MAX)
    # derived: motor saturation speed / |G|, rounded to 0.01 rad/s
    np.testing.assert_allclose(puma.velocity_limit, np.array(MOTOR_SPEED) / np.abs(GEAR), rtol=0, atol=0.005)
    assert np.all(puma.goto.max_velocity < puma.velocity_limit / 2)
    assert np.all(puma.goto.max_acceleration > 0)
    assert 0 < puma.goto.tolerance_q < 0.01 and 0 < puma.goto.tolerance_qd < 0.1
    assert np.all(puma.ki == 0)


def test_home_is_the_nominal_posture(puma):
    """home is the toolbox's qn, with the elbow's pi written as -pi (inside the elbow's range)."""
    np.testing.assert_allclose(np.cos(puma.home), np.cos(QN), atol=1e-7)
    np.testing.assert_allclose(np.sin(puma.home), np.sin(QN), atol=1e-7)
    assert np.all(puma.home >= puma.range_lower) and np.all(puma.home <= puma.range_upper)
    assert not puma.range_lower[2] <= QN[2] <= puma.range_upper[2]  # why: qn's own elbow angle is outside


def test_torque_limits_hold_the_arm_anywhere(puma):
    """Gravity plus the worst Coulomb friction stays well inside the torque limits over the range."""
    worst = np.max([np.abs(published_gravity(q)) for q in random_postures(puma, 500, seed=1)], axis=0)
    friction = np.abs(GEAR) * np.max(np.abs(TC_MOTOR), axis=1)
    assert np.all(worst + friction < 0.6 * puma.torque_limit), worst + friction


# ---------------------------------------------------------------- kinematics


def test_forward_kinematics_matches_the_dh_table(puma, model):
    """100 random postures: every link frame and the end-effector site (position and orientation)
    are the standard DH frames {0}..{6}."""
    data = mujoco.MjData(model)
    bodies, site = _body_ids(model), model.site(puma.end_effector_site).id
    worst_pos = worst_rot = 0.0
    for q in random_postures(puma):
        data.qpos[:] = q
        mujoco.mj_kinematics(model, data)
        frames = dh_frames(q)
        for k, body in enumerate(bodies):  # body k+1 sits at frame {k}, turned by q_(k+1)
            worst_pos = max(worst_pos, np.abs(data.xpos[body] - frames[k][:3, 3]).max())
        worst_pos = max(worst_pos, np.abs(data.site_xpos[site] - frames[6][:3, 3]).max())
        worst_rot = max(worst_rot, np.abs(data.site_xmat[site].reshape(3, 3) - frames[6][:3, :3]).max())
    assert worst_pos < 1e-9 and worst_rot < 1e-9, (worst_pos, worst_rot)


def test_zero_and_ready_postures_by_hand(puma, model):
    """Zero posture: upper arm along +x, forearm straight up; ready (0, pi/2, -pi/2, 0, 0, 0): all up."""
    ee = posed(model, np.zeros(6)).site(puma.end_effector_site).xpos
    np.testing.assert_allclose(ee, [0.4318 + 0.0203, -0.15005, SHOULDER + 0.4318], atol=1e-12)
    ee = posed(model, [0, PI / 2, -PI / 2, 0, 0, 0]).site(puma.end_effector_site).xpos
    np.testing.assert_allclose(ee, [0.0203, -0.15005, SHOULDER + 0.4318 + 0.4318], atol=1e-12)
    shoulder = posed(model, puma.home).xanchor[_joint_ids(model)[1]]
    np.testing.assert_allclose(shoulder, [0, 0, SHOULDER], atol=1e-12)


def test_home_end_effector_and_reach_default_target(puma, model):
    """At home the wrist centre is 0.596 m in front of the waist, 14 mm below the shoulder; the
    reach task's default target lies well inside the workspace: some posture within the joint
    ranges puts the end effector on it (damped least squares from home)."""
    data = posed(model, puma.home)
    site = model.site(puma.end_effector_site).id
    np.testing.assert_allclose(data.site_xpos[site], [0.5963, -0.15005, SHOULDER - 0.0144], atol=1e-4)
    q, jac = puma.home.copy(), np.zeros((3, 6))
    for _ in range(200):
        data.qpos[:] = q
        mujoco.mj_kinematics(model, data)
        mujoco.mj_comPos(model, data)
        error = REACH_DEFAULT_TARGET - data.site_xpos[site]
        mujoco.mj_jacSite(model, data, jac, None, site)
        q = np.clip(q + jac.T @ np.linalg.solve(jac @ jac.T + 1e-4 * np.eye(3), error), puma.range_lower,
                    puma.range_upper)
    assert np.linalg.norm(error) < 1e-6
    assert np.all(q > puma.range_lower + 0.1) and np.all(q < puma.range_upper - 0.1)  # not at a stop
    # and not at the edge of the reach: shoulder to wrist centre in the arm's plane < 0.8 of the arm
    radial = math.sqrt(REACH_DEFAULT_TARGET[0] ** 2 + REACH_DEFAULT_TARGET[1] ** 2 - DH_D[2] ** 2)
    in_plane = math.hypot(radial, REACH_DEFAULT_TARGET[2] - SHOULDER)
    assert in_plane < 0.8 * (DH_A[1] + math.hypot(DH_A[2], DH_D[3]))


def test_no_contacts_at_home_zero_and_limits(puma, model):
    for q in (np.zeros(6), puma.home, puma.range_lower, puma.range_upper):
        assert posed(model, q).ncon == 0


# ---------------------------------------------------------------- dynamics


def test_masses_match_the_published_ones(model):
    masses = model.body_mass[_body_ids(model)]
    np.testing.assert_allclose(masses[1:], MASS[1:], rtol=1e-12)
    assert masses[0] <= 0.001  # link 1: none published; a 1 g point on the waist axis for MuJoCo
    np.testing.assert_allclose(model.body_ipos[_body_ids(model)[0]], 0.0, atol=1e-12)
    assert model.body_mass[model.body("puma_base").id] == 0.0  # geoms carry no mass


def test_gravity_torque_matches_the_published_model(puma, model):
    """qfrc_bias at rest is the torque that holds the arm: equal to the published model's
    (computed here) at 100 random postures, and to the toolbox's printed gravload."""
    data = mujoco.MjData(model)
    worst = 0.0
    for q in random_postures(puma, seed=2):
        data.qpos[:], data.qvel[:] = q, 0.0
        mujoco.mj_forward(model, data)
        worst = max(worst, np.abs(data.qfrc_bias - published_gravity(q)).max())
    assert worst < 1e-9, worst
    for q, printed in zip(PRINTED_POSTURES, PRINTED_GRAVLOAD):
        np.testing.assert_allclose(published_gravity(q), printed, rtol=0, atol=PRINTED_TOLERANCE)
        np.testing.assert_allclose(posed(model, q).qfrc_bias, printed, rtol=0, atol=PRINTED_TOLERANCE)
    # qn (elbow at pi): the toolbox's nominal posture
    np.testing.assert_allclose(posed(model, QN).qfrc_bias, [0, 31.6399, 6.0351, 0, 0.0283, 0], atol=1e-4)


def test_mass_matrix_matches_the_published_model(puma, model):
    """The joint-space inertia (reflected motor inertia included) is the published model's, but
    for link 3's raised moment about z3, which only adds 0.0075 (z0 . z3)^2 to the waist's entry;
    and the toolbox's printed inertia matrices."""
    data = mujoco.MjData(model)
    mass = np.zeros((6, 6))
    worst = largest_change = 0.0
    for q in random_postures(puma, seed=3):
        data.qpos[:] = q
        mujoco.mj_forward(model, data)
        mujoco.mj_fullM(model, data, mass)
        worst = max(worst, np.abs(mass - published_mass_matrix(q, LINK3_IZZ_MODEL)).max())
        change = published_mass_matrix(q, LINK3_IZZ_MODEL) - published_mass_matrix(q)
        z0_z3 = dh_frames(q)[3][2, 2]
        expected = np.zeros((6, 6))
        expected[0, 0] = (LINK3_IZZ_MODEL - INERTIA[2][2]) * z0_z3**2
        np.testing.assert_allclose(change, expected, rtol=0, atol=1e-12)
        largest_change = max(largest_change, change[0, 0] / mass[0, 0])
    assert worst < 1e-9, worst
    assert largest_change < 0.003
    for q, printed in zip(PRINTED_POSTURES, PRINTED_INERTIA):
        mujoco.mj_fullM(model, posed(model, q), mass)
        expected = np.array(printed)
        expected[0, 0] += (LINK3_IZZ_MODEL - INERTIA[2][2]) * dh_frames(q)[3][2, 2] ** 2
        np.testing.assert_allclose(mass, expected, rtol=0, atol=PRINTED_TOLERANCE)


def test_published_link3_inertia_is_not_physical():
    """Why the model changes it: the printed moments break A + B >= C; the model's do not."""
    a, b, c = INERTIA[2]
    assert a + c < b
    assert a + LINK3_IZZ_MODEL >= b and a + b >= LINK3_IZZ_MODEL and b + LINK3_IZZ_MODEL >= a


def test_joint_dynamics_are_the_reflected_motor_values(model):
    """armature = Jm G^2, damping = B G^2, frictionloss = |G| (|Tc+| + |Tc-|) / 2."""
    dofs = model.jnt_dofadr[_joint_ids(model)]
    gear = np.array(GEAR)
    np.testing.assert_allclose(model.dof_armature[dofs], np.array(JM) * gear**2, rtol=1e-5)
    np.testing.assert_allclose(model.dof_damping[dofs], np.array(B_MOTOR) * gear**2, rtol=1e-4)
    coulomb = np.abs(gear) * np.abs(np.array(TC_MOTOR)).mean(axis=1)
    np.testing.assert_allclose(model.dof_frictionloss[dofs], coulomb, rtol=1e-4)


def test_friction_band_inside_goto_tolerance(puma, model):
    """Coulomb friction / kp, the band a PD law may stop in, is inside half the GOTO tolerance."""
    dofs = model.jnt_dofadr[_joint_ids(model)]
    assert np.all(model.dof_frictionloss[dofs] / puma.kp < puma.goto.tolerance_q / 2)


def test_gains_are_damped_and_stable_at_500hz(puma, model):
    """Damping ratio kd / (2 sqrt(kp M_ii)) near 1 at home, and kd dt / M_ii below 0.5 at home
    and zero; the undamped kp dt^2 / M_ii far below the explicit limit 4."""
    mass = np.zeros((6, 6))
    for q in (puma.home, np.zeros(6)):
        mujoco.mj_fullM(model, posed(model, q), mass)
        diag = np.diag(mass)
        assert np.all(puma.kd * puma.control_dt / diag < 0.5)
        assert np.all(puma.kp * puma.control_dt**2 / diag < 0.2)
    mujoco.mj_fullM(model, posed(model, puma.home), mass)
    zeta = puma.kd / (2 * np.sqrt(puma.kp * np.diag(mass)))
    assert np.all((zeta > 0.9) & (zeta < 1.1)), zeta


# ---------------------------------------------------------------- the runner on the PUMA


@pytest.fixture(scope="module")
def runner():
    with Runner(make_task("reach"), "puma560") as r:
        yield r


def _last(runner, column: str, n: int) -> np.ndarray:
    return np.asarray(runner.get_episode()[column])[-n:]


@pytest.mark.parametrize("start", ["home", "elsewhere"])
def test_holds_still_under_gravity_compensation(runner, start):
    """Start at home (after a move elsewhere, so GOTO_START has to bring it back) or at another
    posture, then a 2 s zero-motion segment: the drift stays below the GOTO tolerance, the speed
    below its tolerance, and the torque is the published gravity torque within the friction band."""
    robot = runner.robot
    elsewhere = robot.home + np.array([0.4, -0.3, 0.5, 0.6, -0.5, 0.7])
    runner.send(StartCommand(990, 1, posture=elsewhere if start == "home" else robot.home))
    runner.send(TrajectoryCommand(990, 1, 1, np.tile(runner.last_reply.posture, (10, 1))))
    posture = robot.home if start == "home" else elsewhere
    reply = runner.send(StartCommand(991, 1, posture=posture))
    assert reply.flag == Flag.OK
    np.testing.assert_array_equal(reply.posture, posture)
    n = int(2.0 * robot.control_rate)
    reply = runner.send(TrajectoryCommand(991, 1, 1, np.tile(posture, (n, 1))))
    assert reply.flag == Flag.OK and reply.n_steps == n
    q, qd, u = _last(runner, "q", n), _last(runner, "qd", n), _last(runner, "u", n)
    drift = np.abs(q - posture).max(axis=0)
    assert np.all(drift < robot.goto.tolerance_q), drift
    assert np.all(np.abs(qd[-1]) < robot.goto.tolerance_qd)
    friction = runner.scene.model.dof_frictionloss[runner.scene.dof_adr]
    assert np.all(np.abs(u[-1] - published_gravity(q[-1])) <= friction + 1e-6)
    assert abs(u[-1][1]) > 10  # the shoulder carries the arm: gravity compensation is on


def test_tracks_a_smooth_segment(runner):
    """A 1 s rest-to-rest minimum-jerk move of 0.3 to 0.5 rad per joint, held 0.3 s: tracked
    within 3 mrad, and still within the GOTO tolerance at the end."""
    robot = runner.robot
    runner.send(StartCommand(992, 1))
    goal = robot.home + np.array([0.3, -0.3, 0.3, 0.5, 0.5, -0.5])
    move = min_jerk(robot.home, goal, 1.0, robot.control_dt)
    reply = runner.send(TrajectoryCommand(992, 1, 1, move.q, move.qd, move.qdd, wait_time=0.3))
    assert reply.flag == Flag.OK
    n = len(move.q) + int(0.3 * robot.control_rate)
    q, q_d = _last(runner, "q", n), _last(runner, "q_d", n)
    error = np.abs(q - q_d).max(axis=0)
    assert np.all(error < 0.003), error
    assert np.all(np.abs(q[-1] - goal) < robot.goto.tolerance_q)
    assert np.abs(_last(runner, "qd", n)).max() < 0.6 * robot.velocity_limit.max()


def test_start_jump_cannot_trip_the_velocity_check(runner):
    """A segment may start max_start_jump from the held posture: stepping that far, on one joint
    or on all, either way, stays below 80 % of every velocity limit; a bigger jump is refused."""
    robot = runner.robot
    jump = robot.max_start_jump * (1 - 1e-9)  # (start + jump) - start may round above jump
    steps = [s * jump * np.eye(6)[j] for j in range(6) for s in (1, -1)]
    steps += [s * jump * np.array([1, -1, 1, -1, 1, -1]) for s in (1, -1)]
    worst = np.zeros(6)
    for k, step in enumerate(steps):
        start = runner.send(StartCommand(1000 + k, 1)).posture
        reply = runner.send(TrajectoryCommand(1000 + k, 1, 1, np.tile(start + step, (250, 1))))
        assert reply.flag == Flag.OK, reply.message
        worst = np.maximum(worst, np.abs(_last(runner, "qd", 250)).max(axis=0) / robot.velocity_limit)
    assert np.all(worst < 0.8), worst
    start = runner.send(StartCommand(1100, 1)).posture
    reply = runner.send(TrajectoryCommand(1100, 1, 1, np.tile(start + 1.2 * jump * np.eye(6)[1], (10, 1))))
    assert reply.flag == Flag.DISCONTINUOUS


def test_reach_episode_with_a_wave(runner):
    """The helpers' wave (it starts moving at once) runs on six joints from the reach start."""
    replies = [runner.send(StartCommand(993, 2, context=np.array([0.5, 0.2, 1.5])))]
    for k in (1, 2):  # each segment starts where the last reply says the robot holds
        replies.append(runner.send(TrajectoryCommand(993, k, 2, wave(replies[-1].posture, phase=0.1 * k))))
    assert [r.flag for r in replies] == [Flag.OK] * 3
    assert replies[-1].posture.shape == (6,)
    log = runner.get_episode()
    assert log["q"].shape[1] == 6 and log["u"].shape[1] == 6 and len(log["distance"]) >= 1000


# ---------------------------------------------------------------- tasks built for the WAM


@pytest.mark.parametrize("task", ["pole_balancing"])  # ball_on_beam and tetherball run on it; ball_in_cup: below
def test_wam_tasks_refuse_the_puma(puma, task):
    with pytest.raises(TaskError, match=r"built for the wam robot .* not 'puma560'; run it with --robot wam"):
        build_scene(puma, make_task(task))
    with pytest.raises(TaskError, match="wam"):
        Runner(make_task(task), "puma560")


@pytest.mark.slow  # an `episodic serve` process
def test_serve_refuses_ball_in_cup_on_the_puma():
    out = subprocess.run([sys.executable, "-m", "episodic", "serve", "--robot", "puma560", "--task", "ball_in_cup",
                          "--channel", channel_name()], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert out.returncode == 1
    assert "Error: task 'ball_in_cup' cannot run on 'puma560'" in out.stderr
    assert "j3 at the end of its range" in out.stderr and "Traceback" not in out.stderr + out.stdout


# ---------------------------------------------------------------- listing, serving, settings


def test_robots_lists_the_puma():
    result = CliRunner().invoke(cli_main, ["robots"])
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[0].startswith("wam: 7 DoF")  # the default first
    (at,) = [i for i, line in enumerate(lines) if line.startswith("puma560:")]
    assert lines[at] == "puma560: 6 DoF, 500 Hz control, joints j1, j2, j3, j4, j5, j6"
    assert "Unimation PUMA 560" in lines[at + 2]


def test_tasks_list_the_robots_they_run_on():
    out = CliRunner().invoke(cli_main, ["tasks"]).output
    assert "\nreach: " in out and out.split("\nreach: ", 1)[1].splitlines()[1] == "    robots: any"
    assert out.split("pole_balancing: ", 1)[1].splitlines()[1] == "    robots: wam"


@pytest.mark.slow
def test_serve_puma_over_the_bridge():
    """`episodic serve --robot puma560 --task reach` and the Python client: six joints in the
    header, an episode, its log; a seven-joint trajectory is refused by the client."""
    with Served(channel_name(), None, "--robot", "puma560") as s:
        assert "on robot puma560" in s.banner
        with Client(s.channel, timeout=30) as client:
            assert client.n_dofs == 6 and client.sizes.n_dofs == 6 and client.control_rate == 500.0
            start = client.start_episode(2, context=[0.5, 0.2, 1.5])
            assert start.flag == Flag.OK and start.posture.shape == (6,)
            first = client.send_trajectory(wave(start.posture))
            second = client.send_trajectory(wave(first.posture, phase=0.1))
            assert first.flag == second.flag == Flag.OK and second.episode_done
            log = client.get_episode()
            assert log["q"].shape == (1000, 6) and log["q_d"].shape == (1000, 6)
            np.testing.assert_array_equal(log["q_d"][-1], second.posture)
            client.start_episode(1)
            with pytest.raises(ValueError, match=r"\(n_samples, 6\)"):
                client.send_trajectory(np.zeros((10, 7)))
        assert s.stop() == 0


@pytest.fixture
def robots_copy(tmp_path, monkeypatch):
    """A writable copy of robots/puma560 under tmp_path, with ROBOTS_DIR pointing at it."""
    shutil.copytree(robot_module.ROBOTS_DIR / "puma560", tmp_path / "puma560")
    monkeypatch.setattr(robot_module, "ROBOTS_DIR", tmp_path)
    return tmp_path / "puma560" / "robot.toml"


def test_settings_with_seven_values_are_refused(robots_copy):
    assert load_robot("puma560").n_dofs == 6
    text = robots_copy.read_text()
    old = "kp = [32000, 13000, 8000, 1300, 1050, 700]"
    assert old in text
    robots_copy.write_text(text.replace(old, "kp = [32000, 13000, 8000, 1300, 1050, 700, 700]"))
    with pytest.raises(RobotError, match=r"'kp' needs 6 values"):
        load_robot("puma560")
